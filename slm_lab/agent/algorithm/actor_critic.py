"""Advantage Actor-Critic (A2C, Mnih et al. 2016), synchronous over vector envs.

Advantages: GAE when `lam` is set, else n-step returns when `num_step_returns` is set, else
Monte-Carlo returns minus V; `normalize_advs` standardizes them per batch.
loss = -mean(log pi(a|s) * A) - entropy_coef * mean(H) + val_loss_coef * loss_fn(V(s), V_target)
"""

import torch

from slm_lab.agent.algorithm.config import ActorCriticConfig
from slm_lab.agent.algorithm.policy_gradient import PolicyGradient, flat
from slm_lab.agent.net import net_util
from slm_lab.lib.math_util import calc_gaes, calc_nstep_returns, calc_returns, normalize


class ActorCritic(PolicyGradient):
    config_cls = ActorCriticConfig

    def calc_advs_v_targets(
        self, batch: dict[str, torch.Tensor], values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and value targets, [T, N]; `values` are V(s_t) in env units (no grad)."""
        T, N = batch["rewards"].shape
        with torch.no_grad(), net_util.eval_mode(self.nets):
            next_values = self.denorm_v(self.nets.value(flat(batch["next_obs"]).float())).view(T, N)
        rewards, terminateds, dones = batch["rewards"], batch["terminateds"], batch["dones"]
        lam, n = self.algorithm_spec.get("lam"), self.algorithm_spec.get("num_step_returns")
        if lam is not None:
            advs = calc_gaes(
                rewards, terminateds, dones, values, next_values, self.gamma, float(lam)
            )
            return advs, advs + values
        if n is not None:
            v_targets = calc_nstep_returns(
                rewards, terminateds, dones, next_values, self.gamma, int(n)
            )
        else:
            v_targets = calc_returns(rewards, dones, self.gamma)
        return v_targets - values, v_targets

    def train(self) -> float:
        batch = self.memory.sample(self.device)
        T, N = batch["rewards"].shape
        mean, log_std, v_preds = self.nets.pdparam_value(flat(batch["obs"]).float())
        values = self.denorm_v(v_preds.detach()).view(T, N)
        advs, v_targets = self.calc_advs_v_targets(batch, values)
        advs, v_targets = flat(advs), flat(v_targets)
        if self.normalize_v_targets:
            self.v_rms.update(v_targets)
        if self.algorithm_spec.get("normalize_advs"):
            advs = normalize(advs)
        log_probs, entropy = self.log_prob_entropy(mean, log_std, flat(batch["actions"]))
        policy_loss = -(log_probs * advs).mean()
        val_loss = self.loss_fn(v_preds, self.norm_v(v_targets))
        entropy = entropy.mean()
        loss = (
            policy_loss
            - self.entropy_coef.val * entropy
            + float(self.algorithm_spec.get("val_loss_coef", 0.5)) * val_loss
        )
        self.optimize(loss)
        self.entropy = entropy.item()
        return loss.item()
