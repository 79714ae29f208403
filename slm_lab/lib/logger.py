"""Loguru setup: one format for every process, a file sink per run and per session.

A record bound with `file_only=True` (a session's traceback) goes to the log files and not to
the console, which gets the one-line summary instead.
"""

import contextlib
import os
import sys
from pathlib import Path

from loguru import logger

TIME_FORMAT = "YYYY-MM-DD HH:mm:ss"
LEVEL_WIDTH = 7
TAG_END = "| "
HEAD = f"<green>{{time:{TIME_FORMAT}}}</green> <level>{{level: <{LEVEL_WIDTH}}}</level> {{extra[tag]}}{TAG_END}"
FORMAT = HEAD + "{message}"
_tag = ""  # this process's tag, as set_tag gave it


def _console(record: dict) -> bool:
    return not record["extra"].get("file_only")


def _console_format(record: dict) -> str:
    """A record's console line: its `console` text when bound with one (a line fitted to the
    terminal, the log files keeping the message in full), else its message."""
    return (
        HEAD
        + ("{extra[console]}" if "console" in record["extra"] else "{message}")
        + "\n{exception}"
    )


def console_head_width() -> int:
    """The characters a console line has before its message: time, level and tag."""
    return len(TIME_FORMAT) + 1 + LEVEL_WIDTH + 1 + len(_tag) + len(TAG_END)


def console_width() -> int | None:
    """The characters a console line has for its message, less its time, level and tag: COLUMNS
    when set, else the width of the terminal the console (stderr) is on; None (no limit) when it
    is not a terminal (a pipe, a file, CI), whose lines are kept whole."""
    head = console_head_width()
    if columns := os.environ.get("COLUMNS", "").strip():
        if columns.isdigit():
            return int(columns) - head
    try:
        return os.get_terminal_size(sys.__stderr__.fileno()).columns - head
    except (AttributeError, ValueError, OSError):  # no stderr, or not a terminal
        return None


def setup(level: str = "INFO", tag: str = "") -> None:
    """Route logs to stderr at `level` (and drop every other sink); `tag` (e.g. a session id)
    prefixes every line."""
    logger.remove()
    set_tag(tag)
    logger.add(
        sys.stderr, level=level.upper(), format=_console_format, colorize=None, filter=_console
    )


def set_tag(tag: str) -> None:
    global _tag
    _tag = f"{tag} " if tag else ""
    logger.configure(extra={"tag": _tag})


class LogFile:
    """A log file that drops a line its disk has no room for (the console still shows it): a
    full disk stops the run with the run's own one-line error, not with a logging traceback
    at every line after."""

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (closed by stop)

    def write(self, message: str) -> None:
        with contextlib.suppress(OSError):
            self.file.write(message)
            self.file.flush()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


def add_file(path: str, level: str = "INFO") -> int:
    return logger.add(LogFile(path), level=level.upper(), format=FORMAT, colorize=False)


def remove(sink_id: int) -> None:
    logger.remove(sink_id)


def last_line(e: BaseException) -> str:
    """`Type: message`, the message's last line (what a console needs of a failure)."""
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[-1]}" if lines else type(e).__name__


__all__ = [
    "logger",
    "setup",
    "set_tag",
    "console_width",
    "console_head_width",
    "add_file",
    "remove",
    "last_line",
]
