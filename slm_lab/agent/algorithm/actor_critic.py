"""Advantage Actor-Critic (A2C, Mnih et al. 2016), synchronous over vector envs.

Advantages: GAE when `lam` is set, else n-step returns when `num_step_returns` is set, else
Monte-Carlo returns minus V; `normalize_advs` standardizes them per batch.
loss = -mean(log pi(a|s) * A) - entropy_coef * mean(H) + val_loss_coef * loss_fn(V(s), V_target)
The metrics row also has policy_loss, value_loss (loss_fn(V(s), V_target)), entropy, and
explained_variance = 1 - Var[V_target - V] / Var[V_target] of the batch's V(s) (math_util).

With self-imitation (the SIL and PPOSIL configs) the actor-critic holds a `SelfImitation`
component: every transition also goes to its replay, and each training call ends with its
steps (see sil.py).
"""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.config import ActorCriticConfig
from slm_lab.agent.algorithm.policy_gradient import PolicyGradient, flat
from slm_lab.agent.algorithm.sil import SelfImitation
from slm_lab.agent.memory.base import Batch, Transition
from slm_lab.agent.net import net_util
from slm_lab.lib.math_util import (
    calc_gaes,
    calc_nstep_returns,
    calc_returns,
    explained_variance,
    normalize,
)


class ActorCritic(PolicyGradient):
    config: ActorCriticConfig
    STATS = ("policy_loss", "value_loss", "entropy", "explained_variance")

    def init_nets(self) -> None:
        super().init_nets()
        self.normalize_v_targets = self.config.normalize_v_targets
        self.sil = (
            SelfImitation(self, self.config, self.agent_config.memory)
            if self.config.self_imitation
            else None
        )

    def calc_advs_v_targets(
        self, batch: Batch, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and value targets, [T, N]; `values` are V(s_t) in env units (no grad)."""
        rewards, terminateds, dones = batch.rewards, batch.terminateds, batch.dones
        lam, n = self.config.lam, self.config.num_step_returns
        if lam is None and n is None:  # Monte-Carlo returns: nothing to bootstrap from
            v_targets = calc_returns(rewards, dones, self.gamma)
            return v_targets - values, v_targets
        next_values = self.next_values(batch, values)
        if lam is not None:
            advs = calc_gaes(rewards, terminateds, dones, values, next_values, self.gamma, lam)
            return advs, advs + values
        v_targets = calc_nstep_returns(rewards, terminateds, dones, next_values, self.gamma, n)
        return v_targets - values, v_targets

    def next_values(self, batch: Batch, values: torch.Tensor) -> torch.Tensor:
        """V(s_{t+1}), [T, N] in env units, from the net in eval mode. Where an episode goes on,
        s_{t+1} is the next row's s_t (the memory stores the same observation twice), so its
        value is `values` moved up a row; the net runs only on the successors the batch does not
        start a step from: the last row's and those of steps that ended an episode (a final
        observation). `values` came from the nets in their current mode: where layers that act
        differently in eval mode (batch norm, dropout) are in train mode, every row is run."""
        if any(m.training for m in net_util.mode_layers(self.nets)):
            T, N = values.shape
            with torch.no_grad(), net_util.eval_mode(self.nets):
                v = self.nets.value(flat(batch.next_obs))
            return self.denorm_v(v).view(T, N)
        fresh = batch.dones.clone()
        fresh[-1] = True
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        with torch.no_grad(), net_util.eval_mode(self.nets):
            v = self.nets.value(batch.next_obs[fresh])
        next_values[fresh] = self.denorm_v(v).view(-1)
        return next_values

    def store(self, t: Transition) -> None:
        super().store(t)
        if self.sil is not None:
            self.sil.add(t)

    def train(self) -> float:
        loss = self.train_actor_critic()
        if self.sil is not None:
            self.sil.train()
        return loss

    def train_actor_critic(self) -> float:
        batch = self.memory.sample(self.device)
        T, N = batch.rewards.shape
        mean, log_std, v_preds = self.nets.pdparam_value(flat(batch.obs))
        values = self.denorm_v(v_preds.detach()).view(T, N)
        advs, v_targets = self.calc_advs_v_targets(batch, values)
        advs, v_targets = flat(advs), flat(v_targets)
        if self.normalize_v_targets:
            self.v_rms.update(v_targets)
        if self.config.normalize_advs:
            advs = normalize(advs)
        log_probs, entropy = self.log_prob_entropy(mean, log_std, flat(batch.actions))
        policy_loss = -(log_probs * advs).mean()
        val_loss = self.loss_fn(v_preds, self.norm_v(v_targets))
        entropy = entropy.mean()
        loss = policy_loss - self.entropy_coef.val * entropy + self.config.val_loss_coef * val_loss
        self.optimize(loss)
        return self.record(
            loss,
            policy_loss=policy_loss,
            value_loss=val_loss,
            entropy=entropy,
            explained_variance=explained_variance(flat(values), v_targets),
        )

    def final_values(self, t: Transition) -> np.ndarray | None:
        """V(s_final) of every env (in env units), when some episode was cut by a time limit."""
        if not np.any(t.truncateds & ~t.terminateds):
            return None
        with torch.no_grad(), net_util.eval_mode(self.nets):
            v = self.nets.value(self.to_tensor(t.next_obs).float())
        return self.denorm_v(v).view(-1).cpu().numpy()

    def episodes_restarted(self) -> None:
        super().episodes_restarted()
        if self.sil is not None:
            self.sil.memory.mark_truncated()

    def metrics(self) -> dict[str, float]:
        sil = {"sil_loss": self.sil.loss} if self.sil is not None else {}
        return {**super().metrics(), **sil}

    def extra_state(self) -> dict[str, Any]:
        sil = {"sil": self.sil.state_dict()} if self.sil is not None else {}
        return {**super().extra_state(), **sil}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        if self.sil is not None:
            self.sil.load_state_dict(state["sil"])
