"""Base of the policy-gradient family (Reinforce, ActorCritic, PPO): nets, acting, log-probs."""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.config import PolicyGradientConfig
from slm_lab.agent.memory.base import Transition
from slm_lab.agent.net import net_util
from slm_lab.agent.net.policy import PolicyNets
from slm_lab.lib import distribution as D
from slm_lab.lib.math_util import RunningMeanStd
from slm_lab.lib.schedule import VarScheduler


class PolicyGradient(Algorithm):
    config: PolicyGradientConfig
    STATS = ("policy_loss", "entropy")  # the policy term of the loss; mean entropy of pi(.|s)

    def init_nets(self) -> None:
        net = self.agent_config.net
        self.nets = PolicyNets(
            net, self.obs_shape, self.discrete, self.action_dim, self.config.with_critic
        ).to(self.device)
        parts = self.nets.parts()
        if len(parts) > 1 and net.base.use_same_optim:
            # one optimizer, the actor's, over both nets
            params = [p for part, _ in parts for p in part.parameters()]
            self.optims = [net_util.build_optim(parts[0][1].optim_spec, params)]
            scheduler_specs = [parts[0][1].lr_scheduler_spec]
        else:
            self.optims = [
                net_util.build_optim(config.optim_spec, part.parameters()) for part, config in parts
            ]
            scheduler_specs = [config.lr_scheduler_spec for _, config in parts]
        self.lr_schedulers = [
            s
            for s in (
                net_util.build_lr_scheduler(spec, o, self.clock)
                for spec, o in zip(scheduler_specs, self.optims, strict=True)
            )
            if s is not None
        ]
        if len(self.optims) == 1:  # one optimizer over everything: clip the global gradient norm
            clip_groups = [(list(self.nets.parameters()), parts[0][1].clip_grad_val)]
        else:
            clip_groups = [
                (list(part.parameters()), config.clip_grad_val) for part, config in parts
            ]
        self.grad_step = net_util.GradStep(self.optims, clip_groups)
        self.squash = self.config.action_pdtype == "NormalTanh"  # tanh-squashed Gaussian
        self.acted_u: np.ndarray | None = None  # NormalTanh: the last act's pre-tanh samples
        self.entropy_coef = VarScheduler(
            self.config.entropy_coef_spec, self.clock.max_frame, default=0.0
        )
        self.normalize_v_targets = False  # learn V in a running normalizer's units (ActorCritic)
        self.v_rms = RunningMeanStd()
        self.loss_fn = net_util.build_loss(net.base.loss_spec)

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"nets": self.nets}

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy_actions(*self.nets.pdparam(obs))

    def policy_actions(self, mean: torch.Tensor, log_std: torch.Tensor | None) -> torch.Tensor:
        """Actions from the policy's parameters, as `action_policy` picks them (NormalTanh: the
        pre-tanh sample u; `act` squashes it)."""
        if self.discrete:
            return D.select_discrete(mean, self.action_policy, self.explore_var.val)
        return mean if self.action_policy == "greedy" else D.normal_sample(mean, log_std)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """NormalTanh sends tanh(u) to the env and keeps u for `update`: the memory stores u, so
        that the log-probs of training are taken at the sample itself."""
        actions = super().act(obs)
        if not self.squash:
            return actions
        self.acted_u = actions
        return np.tanh(actions)

    def update(self, t: Transition) -> None:
        """NormalTanh: the transition's actions are the env's tanh(u); the memories get the u
        that `act` kept."""
        if self.squash and not self.eval_mode:
            if self.acted_u is None:
                raise RuntimeError("NormalTanh: update(t) without an act() before it")
            t, self.acted_u = t._replace(actions=self.acted_u), None
        super().update(t)

    def log_prob_entropy(
        self, mean: torch.Tensor, log_std: torch.Tensor | None, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(a|s) of the batch's actions (NormalTanh: their pre-tanh samples) and the
        policy's entropy (NormalTanh has no closed form: a one-draw reparameterized estimate,
        D.normal_tanh_entropy)."""
        if self.discrete:
            return D.categorical_log_prob_entropy(mean, actions)
        if self.squash:
            log_prob = D.normal_tanh_log_prob(mean, log_std, actions)
            return log_prob, D.normal_tanh_entropy(mean, log_std)
        return D.normal_log_prob(mean, log_std, actions), D.normal_entropy(log_std)

    def log_prob(
        self, mean: torch.Tensor, log_std: torch.Tensor | None, actions: torch.Tensor
    ) -> torch.Tensor:
        """log pi(a|s) alone, computed as log_prob_entropy computes it."""
        if self.discrete:
            return D.categorical_log_prob(mean, actions)
        if self.squash:
            return D.normal_tanh_log_prob(mean, log_std, actions)
        return D.normal_log_prob(mean, log_std, actions)

    # value targets may be learnt in normalized units (normalize_v_targets)
    def denorm_v(self, v: torch.Tensor) -> torch.Tensor:
        return v * self.v_rms.std + self.v_rms.mean if self.normalize_v_targets else v

    def norm_v(self, v: torch.Tensor) -> torch.Tensor:
        return (v - self.v_rms.mean) / self.v_rms.std if self.normalize_v_targets else v

    def update_schedules(self) -> None:
        super().update_schedules()
        self.entropy_coef.update(self.clock.frame, self.eval_mode)

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "entropy_coef": self.entropy_coef.val}

    def extra_state(self) -> dict[str, Any]:
        return {"v_rms": self.v_rms.state_dict()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.v_rms.load_state_dict(state["v_rms"])


def flat(x: torch.Tensor) -> torch.Tensor:
    """[T, N, ...] -> [T*N, ...]"""
    return x.reshape(-1, *x.shape[2:])
