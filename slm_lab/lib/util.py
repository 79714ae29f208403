"""Small helpers shared across modules."""

import time
from typing import Any

from loguru import logger

_last_warned: dict[str, float] = {}
WARN_INTERVAL_S = 60.0


def warn_rate_limited(key: str, message: str, interval: float = WARN_INTERVAL_S) -> None:
    """Log `message` at most once per `interval` seconds per `key`."""
    now = time.monotonic()
    if now - _last_warned.get(key, -interval) >= interval:
        _last_warned[key] = now
        logger.warning(message)


def role_spec(net_spec: dict[str, Any], role: str) -> dict[str, Any]:
    """The net spec one net sees: shared keys, overridden by keys prefixed `<role>_`.

    e.g. for role 'critic', `critic_optim_spec` becomes its `optim_spec`.
    """
    spec = {k: v for k, v in net_spec.items() if not k.startswith(("actor_", "critic_"))}
    prefix = f"{role}_"
    own = {k[len(prefix) :]: v for k, v in net_spec.items() if k.startswith(prefix)}
    if own.get("arc") is not None or own.get("arc_file") is not None:
        spec.pop("arc", None)  # a role's own torcharc body replaces the shared one, either key
        spec.pop("arc_file", None)
    spec.update(own)
    return spec
