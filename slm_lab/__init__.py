"""SLM Lab: modular deep reinforcement learning in PyTorch.

`load_agent` (slm_lab.trained) is imported when first used, so `import slm_lab` loads no torch.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors; at run time, __getattr__ below
    from slm_lab.trained import TrainedAgent, load_agent

ROOT_DIR = Path(__file__).resolve().parent.parent
SPEC_DIR = Path(__file__).resolve().parent / "spec"
__version__ = "6.0.0"
__all__ = ["ROOT_DIR", "SPEC_DIR", "TrainedAgent", "__version__", "load_agent"]


def __getattr__(name: str) -> Any:
    if name in ("load_agent", "TrainedAgent"):
        from slm_lab import trained

        return getattr(trained, name)
    raise AttributeError(f"module 'slm_lab' has no attribute {name!r}")
