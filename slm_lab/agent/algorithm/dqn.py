"""Deep Q-learning (Mnih et al. 2015) and Double DQN (van Hasselt et al. 2016).

For a sampled transition (s, a, r, s') the target y is
  VanillaDQN: y = r + gamma * (1 - terminated) * max_a' Q(s', a')                  (online net)
  DQN:        y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')           (target net)
  DoubleDQN:  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))  (online selects)
loss = mean(w * loss_fn(Q(s, a), y)), w the importance-sampling weights of prioritized replay
(1 otherwise); |Q(s, a) - y| are the transitions' new priorities.
The target net follows the online net: `update_type: replace` copies it every `update_frequency`
frames, `polyak` blends it in with `polyak_coef` after every gradient step. A dueling net
(`DuelingMLPNet`, `DuelingConvNet`) only changes how Q is computed.
"""

import copy

import torch

from slm_lab.agent.algorithm.config import DoubleDQNConfig, DQNConfig, VanillaDQNConfig
from slm_lab.agent.algorithm.off_policy import OffPolicy
from slm_lab.agent.net import net_util
from slm_lab.lib import distribution as D


class VanillaDQN(OffPolicy):
    config_cls = VanillaDQNConfig

    def init_nets(self) -> None:
        super().init_nets()
        self.init_q_net(loss_reduction="none")  # per-sample losses, for PER weights

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"net": self.net}

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)[0]

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        return D.select_discrete(self.q_values(obs), self.action_policy, self.explore_var.val)

    def next_q(self, next_obs: torch.Tensor) -> torch.Tensor:
        """max_a' Q(s', a') from the online net."""
        return self.q_values(next_obs).max(-1).values

    def train_batch(self, batch: dict[str, torch.Tensor]) -> float:
        obs, actions = batch["obs"].float(), batch["actions"].long()
        q_preds = self.q_values(obs).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad(), net_util.eval_mode(*self.modules().values()):
            next_q = self.next_q(batch["next_obs"].float())
            q_targets = (
                batch["rewards"] + self.gamma * (1.0 - batch["terminateds"].float()) * next_q
            )
        loss = self.weighted_mean(self.loss_fn(q_preds, q_targets), batch)
        if self.optimize(loss):
            self.update_priorities(batch, q_preds - q_targets)
            self.update_target()
        return loss.item()

    def update_target(self) -> None:
        """VanillaDQN has no target net."""


class DQN(VanillaDQN):
    config_cls = DQNConfig

    def init_nets(self) -> None:
        super().init_nets()
        self.target_net = copy.deepcopy(self.net)
        self.target_net.requires_grad_(False)
        self.update_type = self.net_spec.get("update_type", "replace")
        self.update_frequency = int(self.net_spec.get("update_frequency") or 1)
        self.polyak_coef = float(self.net_spec.get("polyak_coef") or 0.0)

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"net": self.net, "target_net": self.target_net}

    def next_q(self, next_obs: torch.Tensor) -> torch.Tensor:
        """max_a' Q_target(s', a')"""
        return self.target_net(next_obs)[0].max(-1).values

    def update_target(self) -> None:
        if self.update_type == "polyak":
            self.polyak_update(self.net, self.target_net, self.polyak_coef)
        elif self.clock.frame - self.last_target_update >= self.update_frequency:
            self.target_net.load_state_dict(self.net.state_dict())
            self.last_target_update = self.clock.frame


class DoubleDQN(DQN):
    config_cls = DoubleDQNConfig

    def next_q(self, next_obs: torch.Tensor) -> torch.Tensor:
        """Q_target(s', argmax_a' Q(s', a')): the online net selects, the target net evaluates."""
        best = self.q_values(next_obs).argmax(-1, keepdim=True)
        return self.target_net(next_obs)[0].gather(-1, best).squeeze(-1)
