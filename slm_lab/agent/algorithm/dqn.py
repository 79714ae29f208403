"""Deep Q-learning (Mnih et al. 2015) and Double DQN (van Hasselt et al. 2016).

For a sampled transition (s, a, r, s') the target y is
  VanillaDQN: y = r + gamma * (1 - terminated) * max_a' Q(s', a')                  (online net)
  DQN:        y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')           (target net)
  DoubleDQN:  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))  (online selects)
loss = mean(w * loss_fn(Q(s, a), y)), w the importance-sampling weights of prioritized replay
(1 otherwise); |Q(s, a) - y| are the transitions' new priorities. The metrics row has q_mean,
mean(Q(s, a)), and td_error, mean(|Q(s, a) - y|), of the trained batches.
The target net follows the online net: `update_type: replace` (the default) copies it every
`update_frequency` frames, `polyak` blends it in with `polyak_coef` after every gradient step.
A dueling net (`DuelingMLPNet`, `DuelingConvNet`) only changes how Q is computed. The three
names are one class: the spec's name (its config) says which target it computes.
"""

import torch

from slm_lab.agent.algorithm.config import DoubleDQNConfig, VanillaDQNConfig
from slm_lab.agent.algorithm.off_policy import OffPolicy
from slm_lab.agent.memory.base import Batch
from slm_lab.agent.net import net_util

DEFAULT_UPDATE_FREQUENCY = 1  # replace: copy after every gradient step


class DQN(OffPolicy):
    config: VanillaDQNConfig
    STATS = ("q_mean", "td_error")

    def init_nets(self) -> None:
        super().init_nets()
        self.init_q_net(loss_reduction="none")  # per-sample losses, for PER weights
        self.double = isinstance(self.config, DoubleDQNConfig)
        if type(self.config) is not VanillaDQNConfig:
            net = self.agent_config.net.base
            self.target = net_util.TargetNets(
                [self.net],
                net.update_type or "replace",
                net.update_frequency or DEFAULT_UPDATE_FREQUENCY,
                net.polyak_coef or 0.0,
                self.clock,
            )

    def modules(self) -> dict[str, torch.nn.Module]:
        if self.target is None:
            return {"net": self.net}
        return {"net": self.net, "target_net": self.target.targets[0]}

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)[0]

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q_actions(lambda: self.q_values(obs), obs)

    def next_q(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The value of s' the target bootstraps from (see the module docstring)."""
        if self.target is None:
            return self.q_values(next_obs).max(-1).values
        target_q = self.target.targets[0](next_obs)[0]
        if self.double:  # the online net selects, the target net evaluates
            best = self.q_values(next_obs).argmax(-1, keepdim=True)
            return target_q.gather(-1, best).squeeze(-1)
        return target_q.max(-1).values

    def train_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        obs, actions = batch.obs, batch.actions.long()  # obs as stored: the net makes them float
        q_preds = self.q_values(obs).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad(), net_util.eval_mode(*self.modules().values()):
            next_q = self.next_q(batch.next_obs)
            q_targets = batch.rewards + self.gamma * (1.0 - batch.terminateds.float()) * next_q
        loss = self.weighted_mean(self.loss_fn(q_preds, q_targets), batch)
        td_errors = q_preds.detach() - q_targets
        if self.optimize(loss):
            self.update_priorities(batch, td_errors)
            if self.target is not None:
                self.target.update()
        return {"loss": loss, "q_mean": q_preds.mean(), "td_error": td_errors.abs().mean()}
