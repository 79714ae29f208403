"""Agent: an algorithm (with its nets and memory), and the RNG state a checkpoint keeps."""

import contextlib
import copy
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.registry import ALGORITHMS
from slm_lab.agent.config import AgentConfig
from slm_lab.agent.net import net_util
from slm_lab.env.backend import EnvInfo
from slm_lab.env.clock import Clock


class Agent:
    """What a session trains, measures and checkpoints: an algorithm with its nets and memory.

    `act(obs) -> actions` and `update(transition)` are the algorithm's own (bound once: they
    run every env step); the rest is what the session, enjoy and checkpoints use.
    """

    def __init__(
        self,
        config: AgentConfig,
        env: EnvInfo,
        clock: Clock,
        device: torch.device | None = None,
    ) -> None:
        """`env`: what the agent knows of its envs; `clock`: the run's (its schedules read it);
        `device`: its session's placement's (None: the one the net's `gpu` asks for)."""
        if device is None:
            device = net_util.get_device(config.net.base.gpu if config.net is not None else False)
        self.algorithm = ALGORITHMS[config.algorithm.name](config, env, clock, device)
        self.act = self.algorithm.act
        self.update = self.algorithm.update

    def metrics(self) -> dict[str, float]:
        """The algorithm's values for a checkpoint row (loss, lr, entropy, ...)."""
        return self.algorithm.metrics()

    def precision_note(self) -> tuple[str, str] | None:
        """(log level, one line) when a net runs `precision: bf16-mixed`, else None."""
        if not any(
            getattr(m, "bf16", False)
            for n in self.algorithm.modules().values()
            for m in n.modules()
        ):
            return None
        device = self.algorithm.device
        if net_util.bf16_native(device):
            return "INFO", f"precision bf16-mixed: native bfloat16 on {device.type}"
        return "WARNING", (
            f"precision bf16-mixed: this {device.type} has no native bfloat16 (AVX512-BF16 or "
            "AMX on a CPU), so it is emulated and slower than float32; set precision: float32 "
            "in agent.net (and agent.critic_net)"
        )

    def model_state(self) -> dict[str, Any]:
        """A copy of the nets' weights: what acting needs."""
        return copy.deepcopy({k: m.state_dict() for k, m in self.algorithm.modules().items()})

    def load_model(self, nets_state: dict[str, Any]) -> None:
        self.algorithm.load_weights(nets_state)

    def state_dict(self) -> dict[str, Any]:
        """Everything training needs to continue exactly (nets, optimizers, memory, ...)."""
        return self.algorithm.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algorithm.load_state_dict(state)

    def episodes_restarted(self) -> None:
        """A resume restarted the env's episodes: stored episodes in progress end there."""
        self.algorithm.episodes_restarted()

    def set_eval(self) -> None:
        """Act greedily-or-as-trained for evaluation: schedules at their end values, no updates."""
        self.algorithm.eval_mode = True
        self.algorithm.update_schedules()

    @contextlib.contextmanager
    def evaluating(self, env: EnvInfo, greedy: bool) -> Iterator[None]:
        """Within the block the agent acts on `env` for evaluation: schedules at their end values,
        updates ignored, greedy actions when `greedy`. On exit it is back to training: the
        random actions it samples, its action policy and the schedules' values at the clock's
        frame."""
        algorithm = self.algorithm
        train_sampler, action_policy = algorithm.sample_actions, algorithm.action_policy
        algorithm.sample_actions = env.sample_actions  # what acting without a net samples
        if greedy:
            algorithm.action_policy = "greedy"
        algorithm.eval_mode = True
        algorithm.update_schedules()
        try:
            yield
        finally:
            algorithm.sample_actions, algorithm.action_policy = train_sampler, action_policy
            algorithm.eval_mode = False
            algorithm.update_schedules()

    def nonfinite_param(self) -> str | None:
        """The name of a parameter with a non-finite value, if any (a dev-mode check)."""
        for name, module in self.algorithm.modules().items():
            for pname, p in module.named_parameters():
                if not torch.isfinite(p).all():
                    return f"{name}.{pname}"
        return None


def rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype("int64")), *np_state[2:]),
        "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype("uint32"), *rest))
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
