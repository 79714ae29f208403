"""The machine's resources a run needs before it starts: the memory its sessions' replays
allocate, the CUDA GPU its nets ask for."""

from typing import TYPE_CHECKING

import psutil

from slm_lab.agent.memory.config import ReplayConfig
from slm_lab.env.registry import backend_module
from slm_lab.lib.config import SpecError
from slm_lab.lib.util import machine_gpus
from slm_lab.spec.env_fit import env_spaces
from slm_lab.spec.schema import Spec

if TYPE_CHECKING:  # the layout of a replay loads Gymnasium when it is built
    from slm_lab.agent.memory.layout import Layout

BYTE_UNITS = ("B", "KB", "MB", "GB", "TB")


def check_memory_fit(spec: Spec, sessions: int) -> None:
    """A replay that will not fit: `sessions` sessions, all running at once, each allocate
    their replay at the start; refused when together they need more memory than this machine
    has available now (before a run that would fail or swap midway)."""
    memory, algo = spec.agent.memory, spec.agent.algorithm
    if not isinstance(memory, ReplayConfig) or not algo.needs_net or env_spaces(spec.env) is None:
        return
    from slm_lab.agent.memory.layout import replay_bytes

    one = replay_bytes(memory, memory_layout(spec))
    total, available = sessions * one, psutil.virtual_memory().available
    if total > available:
        hint = "max_size or meta.max_session" if sessions > 1 else "max_size"
        raise SpecError(
            f"agent.memory.max_size: {sessions} session{'s' if sessions > 1 else ''} x {format_bytes(one)} replay = {format_bytes(total)}, more than the {format_bytes(available)} available; lower {hint}"
        )


def fetch_env_assets(spec: Spec) -> None:
    """What the env downloads at its first use, fetched before the sessions start (SpecError
    in one line where it cannot be)."""
    backend_module(spec.env.name).fetch_assets(spec.env)


def check_gpu(spec: Spec) -> None:
    """A net that asks for CUDA (gpu: true) on a machine without an NVIDIA GPU: refused before
    the run, whose sessions would fail building the agent."""
    net = spec.agent.net
    if (
        net is not None
        and net.base.gpu not in ("auto", False, "false", None)
        and not machine_gpus()
    ):
        raise SpecError(
            "agent.net.gpu: true needs a CUDA GPU and this machine has none; set it to auto (CUDA when there is one) or false"
        )


def memory_layout(spec: Spec) -> "Layout":
    """The layout of the memory a session of `spec` will build, from its env's spaces."""
    from slm_lab.agent.memory.layout import Layout
    from slm_lab.env.backend import agent_obs_dtype

    env = spec.env
    obs_space, action_space = env_spaces(env)
    float_obs = env.normalize_obs or env.obs_clip is not None  # as the backend's normalizer
    obs_dtype = agent_obs_dtype(obs_space, float_obs)
    frame_stack = backend_module(env.name).frame_stack(obs_space)
    return Layout.of_spaces(env.num_envs, obs_space, obs_dtype, action_space, frame_stack)


def format_bytes(n: float) -> str:
    """`n` bytes in decimal units with one decimal: 5.6 GB."""
    for unit in BYTE_UNITS[:-1]:
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} {BYTE_UNITS[-1]}"
