"""Small helpers shared across modules."""

import time

from loguru import logger

_last_warned: dict[str, float] = {}
WARN_INTERVAL_S = 60.0


def warn_rate_limited(key: str, message: str, interval: float = WARN_INTERVAL_S) -> None:
    """Log `message` at most once per `interval` seconds per `key`."""
    now = time.monotonic()
    if now - _last_warned.get(key, -interval) >= interval:
        _last_warned[key] = now
        logger.warning(message)
