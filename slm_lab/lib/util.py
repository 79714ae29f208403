"""Small helpers shared across modules."""

import contextlib
import importlib
import os
import threading
import time
from importlib.util import find_spec
from pathlib import Path

from loguru import logger

_last_warned: dict[str, float] = {}
WARN_INTERVAL_S = 60.0


def warn_rate_limited(key: str, message: str, interval: float = WARN_INTERVAL_S) -> None:
    """Log `message` at most once per `interval` seconds per `key`."""
    now = time.monotonic()
    if now - _last_warned.get(key, -interval) >= interval:
        _last_warned[key] = now
        logger.warning(message)


def counted(n: int, noun: str) -> str:
    """`1 session`, `2 sessions`: a count and its noun, plural unless 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# what the light core (the project in light/) lacks and training needs
FULL_INSTALL_MODULES = ("torch", "gymnasium")
FULL_INSTALL_FIX = "run uv sync in the repository root, not in light/"


def full_install() -> bool:
    """Whether the packages training needs are installed (`uv sync`), not only the light core
    that plots, checks a spec's syntax and shares runs (`uv run` in light/)."""
    return all(find_spec(module) is not None for module in FULL_INSTALL_MODULES)


NVIDIA_GPUS_DIR = Path("/proc/driver/nvidia/gpus")  # one entry per GPU the driver sees (Linux)


def machine_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def machine_gpus() -> int:
    """NVIDIA GPUs this process may use, counted without importing torch: CUDA_VISIBLE_DEVICES
    when it is set (as CUDA reads it: the ids up to the first invalid one), else the driver's."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return len(list(NVIDIA_GPUS_DIR.glob("*"))) if NVIDIA_GPUS_DIR.is_dir() else 0
    count = 0
    for device in visible.split(","):
        if not device.strip() or device.strip().startswith("-"):
            break
        count += 1
    return count


def preload(module: str) -> threading.Thread:
    """Import `module` in a started background thread, while this one waits on something else;
    an import error shows where the module is imported for use."""

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    loader = threading.Thread(target=load, daemon=True, name=f"preload {module}")
    loader.start()
    return loader
