"""Mechanics every algorithm shares: acting, memory, optimizing, schedules, state.

An algorithm subclass says what differs: which nets it builds (`init_nets`), how it turns a
batch into a loss (`train`), and the memory size it needs.

Nets are in train mode for gradient steps; every other forward (acting, targets, the old
policy's pass) runs inside `net_util.eval_mode`, so batch-norm layers normalize it with their
running statistics and do not update them, and a single observation can be normalized.
"""

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.config import AlgorithmConfig
from slm_lab.agent.config import AgentConfig
from slm_lab.agent.memory.base import Layout, Memory, Transition
from slm_lab.agent.memory.registry import MEMORIES
from slm_lab.agent.net import net_util
from slm_lab.agent.net.config import NetConfig
from slm_lab.agent.net.registry import build_net
from slm_lab.env.backend import EnvInfo
from slm_lab.env.clock import Clock
from slm_lab.lib import distribution as D
from slm_lab.lib.schedule import VarScheduler
from slm_lab.lib.util import warn_rate_limited

# When one optimizer's gradient steps are skipped as non-finite MAX_SKIPPED_STEPS times in a
# row, and the run of them spans MIN_SPANNED_CALLS training calls (so at least two whole calls
# between its first and its last), the session gives up: that net has not changed since, and
# the run would act on to max_frame with it frozen. Whole calls, because one bad batch can skip
# the rest of its call (ppo_mujoco's call is 5120 minibatch steps), and the next call's batch,
# taken with the nets as they are, may step again.
MAX_SKIPPED_STEPS = 1000
MIN_SPANNED_CALLS = 4


class TrainingDiverged(RuntimeError):
    """An optimizer's gradient steps were all non-finite for too long (see MAX_SKIPPED_STEPS)."""


class Algorithm:
    """Base: `act` a vector of observations, `update` with the transitions that followed."""

    config: AlgorithmConfig  # the spec's agent.algorithm, typed
    # what a training call measures besides the loss (`record`), for the metrics row
    STATS: tuple[str, ...] = ()

    def __init__(
        self, agent: AgentConfig, env: EnvInfo, clock: Clock, device: torch.device
    ) -> None:
        self.agent_config = agent
        self.config = agent.algorithm
        self.env_info = env
        self.sample_actions = env.sample_actions  # uniform random actions (Random, warm-ups)
        self.clock = clock
        self.device = device
        self.eval_mode = False
        self.gamma = self.config.gamma
        self.action_policy = self.config.action_policy
        self.explore_var = VarScheduler(self.config.explore_var_spec, clock.max_frame)
        self.obs_shape = env.observation_space.shape
        self.discrete = env.is_discrete
        self.action_space = env.action_space
        self.action_dim = (
            env.action_space.n if self.discrete else int(np.prod(env.action_space.shape))
        )
        self.loss = math.nan
        self.train_calls = 0
        # per GradStep skipping now: [steps skipped in a row, the training call the run began in]
        self.skipping: dict[net_util.GradStep, list[int]] = {}
        self.stats = dict.fromkeys(self.STATS, math.nan)  # NaN until a training call measures it
        self.optims: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[torch.optim.lr_scheduler.LRScheduler] = []
        self.init_nets()
        # built once: a net without mode-dependent layers then costs acting nothing
        self.acting_mode = net_util.eval_mode(*self.modules().values())
        self.memory = self.init_memory()

    # -- to override -------------------------------------------------------------------------
    def init_nets(self) -> None:
        """Build nets, optimizers and LR schedulers."""

    def batch_steps(self) -> int:
        """Vector steps (OnPolicyReplay: episodes) of an on-policy batch."""
        return self.config.training_frequency

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def train(self) -> float:
        """One training call on the batch the memory holds; returns the loss (`record`)."""
        raise NotImplementedError

    def to_train(self) -> bool:
        """On-policy: train whenever the memory holds a full batch."""
        return self.memory.ready()

    # -- shared mechanics --------------------------------------------------------------------
    def init_memory(self) -> Memory | None:
        memory = self.agent_config.memory
        if memory is None:
            return None
        return MEMORIES[memory.name](
            memory, self.memory_layout(), self.batch_steps(), self.clock.max_frame
        )

    def memory_layout(self) -> Layout:
        return Layout.of(self.env_info)

    def init_q_net(self, loss_reduction: str = "mean") -> None:
        """One Q-network over the discrete actions, with its optimizer, LR scheduler and loss."""
        net: NetConfig = self.agent_config.net.base
        self.net = build_net(net, self.obs_shape, [self.action_dim]).to(self.device)
        self.net_params = list(self.net.parameters())
        self.optims = [net_util.build_optim(net.optim_spec, self.net_params)]
        scheduler = net_util.build_lr_scheduler(net.lr_scheduler_spec, self.optims[0], self.clock)
        self.lr_schedulers = [scheduler] if scheduler is not None else []
        self.loss_fn = net_util.build_loss(net.loss_spec, loss_reduction)
        self.grad_step = net_util.GradStep(self.optims, [(self.net_params, net.clip_grad_val)])

    def to_tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, device=self.device)

    @torch.inference_mode()
    def act(self, obs: np.ndarray) -> np.ndarray:
        with self.acting_mode:
            actions = self.select_actions(self.to_tensor(obs).float())
        return actions.cpu().numpy()

    def q_actions(self, q_values: Callable[[], torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
        """Discrete actions from the Q-values `q_values()` of `obs` under the action policy;
        epsilon-greedy runs the net only when some env acts greedily."""
        if self.action_policy == "epsilon_greedy":
            return D.epsilon_greedy(
                q_values, obs.shape[:1], self.action_dim, self.explore_var.val, obs.device
            )
        return D.select_discrete(q_values(), self.action_policy, self.explore_var.val)

    def update(self, t: Transition) -> None:
        """Store the transitions; train when the memory is ready; advance schedules."""
        if self.eval_mode:
            return
        self.store(t)
        if self.to_train():
            self.train_calls += 1
            self.loss = self.train()
            for scheduler in self.lr_schedulers:
                scheduler.step()
        self.update_schedules()

    def store(self, t: Transition) -> None:
        """Add a training step's transitions to the memory (and to any other that keeps them)."""
        self.memory.add(t)

    def episodes_restarted(self) -> None:
        """A resume restarted the env's episodes: stored episodes in progress end where they were cut."""
        self.memory.mark_truncated()

    def update_schedules(self) -> None:
        self.explore_var.update(self.clock.frame, self.eval_mode)

    def optimize(
        self, loss: torch.Tensor, grad_step: net_util.GradStep | None = None, count: bool = True
    ) -> bool:
        """Take `grad_step` (default: the algorithm's `self.grad_step`) on `loss`, counted as an
        opt_step of the clock when `count`; a non-finite loss or gradient is skipped with a
        warning (`skipped`)."""
        grad_step = grad_step or self.grad_step
        if not grad_step(loss):
            self.skipped(grad_step, loss.item())
            return False
        if self.skipping:
            self.skipping.pop(grad_step, None)
        if count:
            self.clock.opt_step += 1
        return True

    def skipped(self, grad_step: net_util.GradStep, loss: float) -> None:
        """Count a skipped step of `grad_step`; TrainingDiverged when its run of them is too long."""
        run = self.skipping.setdefault(grad_step, [0, self.train_calls])
        run[0] += 1
        steps, calls = run[0], self.train_calls - run[1] + 1
        if steps >= MAX_SKIPPED_STEPS and calls >= MIN_SPANNED_CALLS:
            raise TrainingDiverged(
                f"{steps} gradient steps in a row, over {calls} training calls, had a non-finite loss or gradient (frame {self.clock.frame}, loss {loss}): the net stopped changing; run `dev` to find NaN or inf in the observations or rewards, or lower the learning rate"
            )
        warn_rate_limited(
            "nonfinite_loss",
            f"skipping an update with a non-finite loss or gradient (loss {loss}) at frame {self.clock.frame}",
        )

    def record(self, loss: torch.Tensor, **stats: torch.Tensor) -> float:
        """Keep a training call's `STATS` for the metrics row and return its loss, read from
        the device together, in one sync."""
        with torch.no_grad():
            loss_value, *values = torch.stack([loss, *stats.values()]).tolist()
        return self.keep_stats(loss_value, dict(zip(stats, values, strict=True)))

    def keep_stats(self, loss: float, stats: dict[str, float]) -> float:
        """Keep `stats` for the metrics row and return `loss`. A NaN value (nothing measured
        this call, e.g. SAC's actor values between `policy_delay` steps) keeps the last one."""
        for name, v in stats.items():
            if not math.isnan(v):
                self.stats[name] = v
        return loss

    @property
    def lr(self) -> float:
        return self.optims[0].param_groups[0]["lr"] if self.optims else math.nan

    def metrics(self) -> dict[str, float]:
        """Values for the checkpoint row: loss, the `STATS`, lr, explore_var, ..."""
        return {
            "loss": self.loss,
            **self.stats,
            "lr": self.lr,
            "explore_var": self.explore_var.val,
        }

    def modules(self) -> dict[str, torch.nn.Module]:
        """Named nets whose weights make up the model checkpoint."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "nets": {k: m.state_dict() for k, m in self.modules().items()},
            "optims": [o.state_dict() for o in self.optims],
            "lr_schedulers": [s.state_dict() for s in self.lr_schedulers],
            "memory": self.memory.state_dict() if self.memory is not None else None,
            "loss": self.loss,
            "stats": dict(self.stats),
            "extra": self.extra_state(),
        }

    def extra_state(self) -> dict[str, Any]:
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(state["nets"][k])
        for o, s in zip(self.optims, state["optims"], strict=True):
            o.load_state_dict(s)
            net_util.match_state_layout(o)
        for sch, s in zip(self.lr_schedulers, state["lr_schedulers"], strict=True):
            sch.load_state_dict(s)
        if self.memory is not None and state["memory"] is not None:
            self.memory.load_state_dict(state["memory"])
        self.loss, self.stats = state["loss"], dict(state["stats"])
        self.load_extra_state(state["extra"])
        self.update_schedules()

    def load_weights(self, nets_state: dict[str, Any]) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(nets_state[k])
