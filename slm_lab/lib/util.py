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
    spec.update({k[len(prefix) :]: v for k, v in net_spec.items() if k.startswith(prefix)})
    return spec
