"""Hogwild training: a trial's sessions are workers, each with its own env, seed and episodes,
updating one set of global nets (Recht et al. 2011; A3C, Mnih et al. 2016).

The global state is the nets that have an optimizer and the state of those optimizers (Adam's
moments and step count). It lives in files mapped into every worker's memory
(`torch.from_file(shared=True)`: one file per dtype, in the trial's hogwild folder, with a
`layout.json` saying where each tensor is), so that every worker's write is every worker's:
`create` writes them, in a process of its own (the run's process stays torch-free), and `attach`
maps them into a worker's algorithm, after the worker's own state is loaded on a resume:

- `shared`: the worker's nets and its optimizers' state *are* the global ones; each gradient
  step updates them in place, without a lock (Hogwild).
- `synced`: the worker's nets are its own copy; a gradient step takes the worker's gradient to
  the global weights with the global optimizer state, and the global weights are then copied
  back into the copy.

The algorithm never knows: its parameters are re-pointed at the global tensors (`.data`), its
optimizers' state is the global state, and in `synced` mode its gradient steps (`GradStep`) go
through `sync`. The files stay the trial's global state: a resumed trial maps them again, and
the global optimizer step count goes on from where it was. Target nets (SAC's) are each
worker's own, copied from the global nets when attached.

A worker's frames are its clock's; the trial's global frame count is the sum of the workers'
(`WorkerClock`, one slot each in a shared array), which frame-based LR schedules follow.
"""

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.net import net_util
from slm_lab.env.clock import Clock
from slm_lab.experiment.build import build
from slm_lab.experiment.task import Placement, SessionTask, SharedNets
from slm_lab.lib.logger import logger

LAYOUT_FILE = "layout.json"
FRAMES_FILE = "frames.bin"  # int64, one slot per worker: its clock's frame
FRAME_DTYPE = np.int64
# (dtype name, offset in its file's elements, shape, stride)
Entry = tuple[str, int, list[int], list[int]]


class WorkerClock(Clock):
    """A worker's clock: its own frames, published in its slot of the trial's frame counts."""

    def __init__(self, max_frame: int, num_envs: int, shared: SharedNets, worker: int) -> None:
        self.slots = np.memmap(
            Path(shared.directory) / FRAMES_FILE, FRAME_DTYPE, "r+", shape=(shared.workers,)
        )
        self.worker, self.workers = worker, shared.workers
        super().__init__(max_frame, num_envs)

    def reset(self) -> None:
        super().reset()
        self.slots[self.worker] = 0

    def tick(self, num_done: int) -> None:
        super().tick(num_done)
        self.slots[self.worker] = self.frame

    def load_state_dict(self, state: dict[str, float]) -> None:
        super().load_state_dict(state)
        self.slots[self.worker] = self.frame

    @property
    def global_frame(self) -> int:
        return int(self.slots.sum())

    @property
    def global_max_frame(self) -> int:
        return self.max_frame * self.workers


# -- the global state on files -----------------------------------------------------------------
def global_modules(algorithm: Algorithm) -> dict[str, nn.Module]:
    """The algorithm's nets that an optimizer trains: the ones the workers share."""
    trained = {id(p) for o in algorithm.optims for g in o.param_groups for p in g["params"]}
    return {
        k: m
        for k, m in algorithm.modules().items()
        if any(id(p) in trained for p in m.parameters())
    }


@torch.no_grad()
def init_optim_state(optim: torch.optim.Optimizer) -> None:
    """Create the optimizer's per-parameter state now (it is made at the first step otherwise),
    so it can be shared: one step on zero gradients with the learning rate and weight decay at
    zero, which changes no parameter, then every step count back to 0."""
    saved = [(g["lr"], g.get("weight_decay")) for g in optim.param_groups]
    for g in optim.param_groups:
        g["lr"] = 0.0
        if "weight_decay" in g:
            g["weight_decay"] = 0.0
        for p in g["params"]:
            p.grad = torch.zeros_like(p)
    net_util.bare_step(optim)()
    for g, (lr, weight_decay) in zip(optim.param_groups, saved, strict=True):
        g["lr"] = lr
        if weight_decay is not None:
            g["weight_decay"] = weight_decay
        for p in g["params"]:
            p.grad = None
            if torch.is_tensor(step := optim.state[p].get("step")):
                step.zero_()


def create(algorithm: Algorithm, directory: Path) -> None:
    """Write the algorithm's global nets and its optimizers' state (created now) to files in
    `directory`, with their layout, and the workers' frame counts (all 0)."""
    for optim in algorithm.optims:
        init_optim_state(optim)
    tensors: list[torch.Tensor] = []
    nets: dict[str, dict[str, Any]] = {}
    for name, module in global_modules(algorithm).items():
        nets[name] = {}
        for key, t in [*module.named_parameters(), *module.named_buffers()]:
            nets[name][key] = len(tensors)
            tensors.append(t.detach())
    optims = []
    for optim in algorithm.optims:
        states = []
        for p in _params(optim):
            states.append({})
            for key, v in optim.state[p].items():
                if torch.is_tensor(v):
                    states[-1][key] = len(tensors)
                    tensors.append(v)
        optims.append(states)
    sizes: dict[str, int] = {}
    entries: list[Entry] = []
    for t in tensors:
        dtype = str(t.dtype).removeprefix("torch.")
        span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
        entries.append((dtype, sizes.get(dtype, 0), list(t.shape), list(t.stride())))
        sizes[dtype] = sizes.get(dtype, 0) + (span if t.numel() else 0)
    directory.mkdir(parents=True, exist_ok=True)
    files = _map(directory, sizes, create=True)
    for t, (dtype, offset, shape, stride) in zip(tensors, entries, strict=True):
        files[dtype].as_strided(shape, stride, offset).copy_(t)
    layout = {
        "sizes": sizes,
        "nets": {k: {n: entries[i] for n, i in v.items()} for k, v in nets.items()},
        "optims": [[{k: entries[i] for k, i in s.items()} for s in o] for o in optims],
    }
    (directory / LAYOUT_FILE).write_text(json.dumps(layout))


def create_frames(directory: Path, workers: int) -> None:
    """The workers' frame counts, all 0, unless a resumed trial has them (each worker's clock
    writes its own as it loads)."""
    path = directory / FRAMES_FILE
    if not path.exists():
        np.zeros(workers, FRAME_DTYPE).tofile(path)


def create_for(task: SessionTask, directory: Path, workers: int) -> None:
    """The global nets of a Hogwild trial of `task`'s spec, in `directory`: the nets and
    optimizers its algorithm builds (with the seed of the trial's first worker)."""
    spec = task.spec
    clock = Clock(spec.env.max_frame, spec.env.num_envs)
    env, agent = build(dataclasses.replace(task, placement=Placement.of(spec)), clock)
    env.close()
    create(agent.algorithm, directory)
    create_frames(directory, workers)
    logger.info(
        f"global nets ({', '.join(global_modules(agent.algorithm))}) shared by {workers} workers"
        f" ({spec.meta.distributed})"
    )


def _map(directory: Path, sizes: dict[str, int], create: bool = False) -> dict[str, torch.Tensor]:
    """Each dtype's file, mapped shared (all processes see every write)."""
    files = {}
    for dtype, size in sizes.items():
        path = directory / f"{dtype}.bin"
        torch_dtype = getattr(torch, dtype)
        if create:
            with open(path, "wb") as f:
                f.truncate(size * torch_dtype.itemsize)
        files[dtype] = torch.from_file(str(path), shared=True, size=size, dtype=torch_dtype)
    return files


def _params(optim: torch.optim.Optimizer) -> list[nn.Parameter]:
    return [p for g in optim.param_groups for p in g["params"]]


# -- a worker ----------------------------------------------------------------------------------
class Worker:
    """A worker's algorithm attached to the global state (see the module)."""

    def __init__(self, algorithm: Algorithm, shared: SharedNets) -> None:
        directory = Path(shared.directory)
        layout = json.loads((directory / LAYOUT_FILE).read_text())
        files = _map(directory, layout["sizes"])
        view = lambda e: files[e[0]].as_strided(e[2], e[3], e[1])  # noqa: E731
        self.mode = shared.mode
        self.algorithm = algorithm
        modules = algorithm.modules()
        # (local tensor, global tensor) of every global net's parameter and buffer
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for name, entries in layout["nets"].items():
                module = modules[name]
                local = dict([*module.named_parameters(), *module.named_buffers()])
                for key, entry in entries.items():
                    t, g = local[key], view(entry)
                    if self.mode == "shared":
                        t.data = g
                    else:
                        t.copy_(g)
                        self.pairs.append((t, g))
            for optim, states in zip(algorithm.optims, layout["optims"], strict=True):
                for p, state in zip(_params(optim), states, strict=True):
                    optim.state[p] = {k: view(e) for k, e in state.items()}
                net_util.match_state_layout(optim)
            for target in _attributes(algorithm, net_util.TargetNets):
                for net, copy in zip(target.nets, target.targets, strict=True):
                    copy.load_state_dict(net.state_dict())
        if self.mode == "synced":
            trained = {id(p): g for p, g in self.pairs}
            for grad_step in _attributes(algorithm, net_util.GradStep):
                grad_step.steps = [
                    self.sync(step, [(p, trained[id(p)]) for p in _params(o) if id(p) in trained])
                    for step, o in zip(grad_step.steps, grad_step.optims, strict=True)
                ]

    @staticmethod
    def sync(
        step: Callable[[], None], pairs: list[tuple[nn.Parameter, torch.Tensor]]
    ) -> Callable[[], None]:
        """`step` taken on the global weights (with the local gradients and the global optimizer
        state), then the global weights copied into the local ones."""
        local_data = [p.data for p, _ in pairs]
        global_data = [g for _, g in pairs]

        def synced() -> None:
            for p, g in pairs:
                p.data = g
            try:
                step()
            finally:
                for (p, _), local in zip(pairs, local_data, strict=True):
                    p.data = local
            with torch.no_grad():
                torch._foreach_copy_(local_data, global_data)

        return synced

    def pull(self) -> None:
        """`synced`: the global weights into the local copy (before a checkpoint, which saves
        the global nets); `shared` has nothing to pull."""
        with torch.no_grad():
            for t, g in self.pairs:
                t.copy_(g)


def _attributes(obj: object, cls: type) -> list[Any]:
    return [v for v in vars(obj).values() if isinstance(v, cls)]


def attach(algorithm: Algorithm, shared: SharedNets) -> Worker:
    """Point a worker's algorithm at the trial's global state (see the module)."""
    return Worker(algorithm, shared)
