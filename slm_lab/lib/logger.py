"""Loguru setup: one format for every process, a file sink per run."""

import sys

from loguru import logger

FORMAT = (
    "<green>{time:YYYY-MM-DD HH:mm:ss}</green> <level>{level: <7}</level> {extra[tag]}| {message}"
)


def setup(level: str = "INFO", tag: str = "") -> None:
    """Route logs to stderr at `level`; `tag` (e.g. a session id) prefixes every line."""
    logger.remove()
    logger.configure(extra={"tag": f"{tag} " if tag else ""})
    logger.add(sys.stderr, level=level.upper(), format=FORMAT, colorize=None)


def add_file(path: str, level: str = "INFO") -> int:
    return logger.add(path, level=level.upper(), format=FORMAT, colorize=False, enqueue=False)


__all__ = ["logger", "setup", "add_file"]
