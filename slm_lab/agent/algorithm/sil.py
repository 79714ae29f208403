"""Self-Imitation Learning (Oh et al. 2018) on top of A2C (`SIL`) and PPO (`PPOSIL`).

The on-policy algorithm trains as usual. Every transition also goes to a self-imitation replay
(`SILReplay`) that keeps past transitions with their episodes' true discounted returns R,
computed over whole episodes once they end. After each on-policy training call, `training_iter`
batches are sampled from it, each used for `training_batch_iter` gradient steps on
  A+ = max(R - V(s), 0)   (only transitions that did better than expected are imitated)
  sil_policy_loss = -mean(log pi(a|s) * A+)
  sil_val_loss = mean(max(R - V(s), 0)^2) / 2
  loss = sil_policy_loss_coef * sil_policy_loss + sil_val_loss_coef * sil_val_loss
The memory spec is the on-policy memory's, with the replay's `sil_replay_name` ("Replay"),
`max_size`, `batch_size` and `use_cer` (SLM Lab v4/v5 format).
"""

from typing import Any

import numpy as np
import torch

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.config import PPOSILConfig, SILConfig
from slm_lab.agent.algorithm.ppo import PPO
from slm_lab.agent.memory.sil import SILReplay
from slm_lab.agent.net import net_util


class SelfImitation(ActorCritic):
    """The self-imitation part, put in front of an actor-critic's own training."""

    def init_nets(self) -> None:
        super().init_nets()
        spec, memory_spec = self.algorithm_spec, self.memory_spec or {}
        replay = memory_spec.get("sil_replay_name", "Replay")
        if replay != "Replay":
            raise ValueError(f"sil_replay_name: only Replay is available, got {replay!r}")
        self.sil_memory = SILReplay(
            memory_spec, self.env.num_envs, *self.memory_layout(), gamma=self.gamma
        )
        self.sil_policy_loss_coef = float(spec.get("sil_policy_loss_coef", 1.0))
        self.sil_val_loss_coef = float(spec.get("sil_val_loss_coef", 0.01))
        self.sil_training_iter = int(spec.get("training_iter") or 1)
        self.sil_training_batch_iter = int(spec.get("training_batch_iter") or 1)
        self.sil_loss = float("nan")

    def update(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminateds: np.ndarray,
        truncateds: np.ndarray,
    ) -> None:
        if not self.eval_mode:
            final_values = None
            if np.any(truncateds & ~terminateds):  # cut by a time limit: bootstrap from V(s')
                with torch.no_grad(), net_util.eval_mode(self.nets):
                    final_values = (
                        self.denorm_v(self.nets.value(self.to_tensor(next_obs).float()))
                        .view(-1)
                        .cpu()
                        .numpy()
                    )
            self.sil_memory.add(obs, actions, rewards, terminateds, truncateds, final_values)
        super().update(obs, actions, rewards, next_obs, terminateds, truncateds)

    def train(self) -> float:
        loss = super().train()
        if self.sil_memory.ready():
            self.sil_loss = self.train_sil()
        return loss

    def train_sil(self) -> float:
        losses = []
        for _ in range(self.sil_training_iter):
            batch = self.sil_memory.sample(self.device)
            obs, actions, returns = batch["obs"].float(), batch["actions"], batch["returns"]
            for _ in range(self.sil_training_batch_iter):
                mean, log_std, v_preds = self.nets.pdparam_value(obs)
                log_probs, _ = self.log_prob_entropy(mean, log_std, actions)
                advs = (returns - self.denorm_v(v_preds.detach())).clamp(min=0.0)
                if not bool((advs > 0).any()):  # nothing to imitate: no step (Adam would drift)
                    continue
                policy_loss = -(log_probs * advs).mean()
                val_loss = 0.5 * (self.norm_v(returns) - v_preds).clamp(min=0.0).pow(2).mean()
                loss = self.sil_policy_loss_coef * policy_loss + self.sil_val_loss_coef * val_loss
                self.optimize(loss)
                losses.append(loss.detach())
        return torch.stack(losses).mean().item() if losses else 0.0

    def episodes_restarted(self) -> None:
        super().episodes_restarted()
        self.sil_memory.mark_truncated()

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "sil_loss": self.sil_loss}

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "sil_memory": self.sil_memory.state_dict(),
            "sil_loss": self.sil_loss,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.sil_memory.load_state_dict(state["sil_memory"])
        self.sil_loss = state["sil_loss"]


class SIL(SelfImitation):
    """A2C + self-imitation."""

    config_cls = SILConfig


class PPOSIL(SelfImitation, PPO):
    """PPO + self-imitation."""

    config_cls = PPOSILConfig
