"""SLM Lab: modular deep reinforcement learning in PyTorch."""

from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parent.parent
SPEC_DIR = Path(__file__).resolve().parent / "spec"
__version__ = "6.0.0"
