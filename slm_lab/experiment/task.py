"""What a session is handed: its task (typed spec, run folder, indices, seed) and its placement.

A `Placement` says where a session runs: its torch device, the cores its envs may use, and an
optional handle to state shared with other sessions (a Hogwild trial's global nets, see
experiment/hogwild.py). It is plain data, made by the torch-free run process and pickled to the
session's: what needs torch is built from it there (`experiment/build.py`).
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slm_lab.experiment.layout import RunLayout, prefix
from slm_lab.spec.schema import Spec

CPU_GPU_VALUES = (False, None, "false", 0)  # a net's `gpu` values that mean the CPU


def session_seed(base: int, trial: int, session: int) -> int:
    """A session's seed from the run's seed, trial and session index.

    Hashed (numpy SeedSequence) rather than base + offset: sub-env i is seeded seed + i, so
    consecutive session seeds would give two sessions identical envs.
    """
    return int(np.random.SeedSequence([base, trial, session]).generate_state(1)[0])


def spec_device(spec: Spec) -> str:
    """The device the spec's nets ask for: cpu, cuda or auto (resolved where torch is loaded).
    A Hogwild trial's nets live in shared memory, on the CPU."""
    net = spec.agent.net
    if net is None or spec.meta.hogwild or net.base.gpu in CPU_GPU_VALUES:
        return "cpu"
    return "auto" if net.base.gpu == "auto" else "cuda"


@dataclass(frozen=True)
class SharedNets:
    """A handle to a Hogwild trial's global nets (experiment/hogwild.py): the folder of the
    files that hold them, how the workers use them (`shared` or `synced`) and how many share
    them."""

    directory: str
    mode: str
    workers: int


@dataclass(frozen=True)
class Placement:
    """Where a session runs (torch-free): `device` cpu, cuda or auto; `cpus` the cores its envs
    may use (None: its share of the machine's free cores when it is built); `shared` a handle to
    the state it shares with the other sessions of its trial (None: it shares nothing)."""

    device: str = "cpu"
    cpus: int | None = None
    shared: SharedNets | None = None

    @classmethod
    def of(cls, spec: Spec, shared: SharedNets | None = None) -> "Placement":
        return cls(spec_device(spec), None, shared)


@dataclass(frozen=True)
class SessionTask:
    """One session to run: which spec, run folder, trial and session, how, and where."""

    spec: Spec
    root: Path  # the run folder
    trial: int
    session: int
    dev: bool = False  # extra checks at every step and row
    resume: bool = False  # continue from the saved state, if there is one
    render: bool = False
    # whether a later train@ can continue the session from its saved state (a search's trial
    # reruns from the start instead)
    resumable: bool = True
    placement: Placement | None = None  # None: the spec's own (Placement.of)
    seed: int | None = field(default=None)  # None: session_seed of the run's seed and indices

    def __post_init__(self) -> None:
        if self.placement is None:
            object.__setattr__(self, "placement", Placement.of(self.spec))
        if self.seed is None:
            seed = session_seed(self.spec.meta.random_seed, self.trial, self.session)
            object.__setattr__(self, "seed", seed)

    @classmethod
    def detached(cls, spec: Spec, seed: int, placement: Placement | None = None) -> "SessionTask":
        """A session's task outside a run folder, with its own seed (an env and agent to
        replay a checkpoint with, or to test)."""
        return cls(spec, Path(), 0, 0, placement=placement, seed=seed)

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.root, self.spec.name)

    @property
    def prefix(self) -> str:
        return prefix(self.spec.name, self.trial, self.session)
