"""A search trial's session process. The trial's Ray worker names `run` as the target of the
processes its fork server starts, and each of them imports this module to find it: it imports
neither torch nor Ray, so the worker stays torch-free and a session loads no Ray Tune. The fork
server has control (torch) loaded already."""

from typing import Any


def run(*args: Any) -> None:
    """control.publishing_session(*args)."""
    from slm_lab.experiment import control  # the fork server's: no import cost here

    control.publishing_session(*args)
