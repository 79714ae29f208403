"""Loguru setup: one format for every process, a file sink per run and per session.

A record bound with `file_only=True` (a session's traceback) goes to the log files and not to
the console, which gets the one-line summary instead.
"""

import sys

from loguru import logger

FORMAT = (
    "<green>{time:YYYY-MM-DD HH:mm:ss}</green> <level>{level: <7}</level> {extra[tag]}| {message}"
)


def _console(record: dict) -> bool:
    return not record["extra"].get("file_only")


def setup(level: str = "INFO", tag: str = "") -> None:
    """Route logs to stderr at `level` (and drop every other sink); `tag` (e.g. a session id)
    prefixes every line."""
    logger.remove()
    set_tag(tag)
    logger.add(sys.stderr, level=level.upper(), format=FORMAT, colorize=None, filter=_console)


def set_tag(tag: str) -> None:
    logger.configure(extra={"tag": f"{tag} " if tag else ""})


def add_file(path: str, level: str = "INFO") -> int:
    return logger.add(path, level=level.upper(), format=FORMAT, colorize=False, enqueue=False)


def remove(sink_id: int) -> None:
    logger.remove(sink_id)


def last_line(e: BaseException) -> str:
    """`Type: message`, the message's last line (what a console needs of a failure)."""
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[-1]}" if lines else type(e).__name__


__all__ = ["logger", "setup", "set_tag", "add_file", "remove", "last_line"]
