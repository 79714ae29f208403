"""Self-Imitation Learning (Oh et al. 2018): a component an actor-critic (A2C: `SIL`, PPO:
`PPOSIL`) holds.

The actor-critic trains as usual. Every transition also goes to a self-imitation replay
(`SILReplay`) that keeps past transitions with their episodes' true discounted returns R,
computed over whole episodes once they end (a time-limit truncation bootstraps from the
critic's V of the final observation). After each of the actor-critic's training calls,
`training_iter` batches are sampled from it, each used for `training_batch_iter` gradient steps
(with the actor-critic's optimizers) on
  A+ = max(R - V(s), 0)   (only transitions that did better than expected are imitated)
  sil_policy_loss = -mean(log pi(a|s) * A+)
  sil_val_loss = mean(max(R - V(s), 0)^2) / 2
  loss = sil_policy_loss_coef * sil_policy_loss + sil_val_loss_coef * sil_val_loss
The memory spec is the on-policy memory's, with the replay's `sil_replay_name` ("Replay"),
`max_size`, `batch_size` and `use_cer` (SLM Lab v4/v5 format).
"""

from typing import TYPE_CHECKING, Any

import torch

from slm_lab.agent.algorithm.config import SelfImitationKeys
from slm_lab.agent.memory.base import Transition
from slm_lab.agent.memory.config import SILMemoryConfig
from slm_lab.agent.memory.sil import SILReplay

if TYPE_CHECKING:
    from slm_lab.agent.algorithm.actor_critic import ActorCritic


class SelfImitation:
    def __init__(
        self, algo: "ActorCritic", config: SelfImitationKeys, memory: SILMemoryConfig
    ) -> None:
        self.algo = algo
        self.config = config
        self.memory = SILReplay(memory, algo.memory_layout(), algo.gamma)
        self.loss = float("nan")

    def add(self, t: Transition) -> None:
        self.memory.add(t, self.algo.final_values(t))

    def train(self) -> None:
        """The self-imitation steps after a training call (none until the replay holds a batch)."""
        if not self.memory.ready():
            return
        algo, config = self.algo, self.config
        losses = []
        for _ in range(config.training_iter):
            batch = self.memory.sample(algo.device)
            obs, actions, returns = batch.obs.float(), batch.actions, batch.rewards
            for _ in range(config.training_batch_iter):
                mean, log_std, v_preds = algo.nets.pdparam_value(obs)
                log_probs = algo.log_prob(mean, log_std, actions)
                advs = (returns - algo.denorm_v(v_preds.detach())).clamp(min=0.0)
                if not bool((advs > 0).any()):  # nothing to imitate: no step (Adam would drift)
                    continue
                policy_loss = -(log_probs * advs).mean()
                val_loss = 0.5 * (algo.norm_v(returns) - v_preds).clamp(min=0.0).pow(2).mean()
                loss = (
                    config.sil_policy_loss_coef * policy_loss + config.sil_val_loss_coef * val_loss
                )
                algo.optimize(loss)
                losses.append(loss.detach())
        self.loss = torch.stack(losses).mean().item() if losses else 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"memory": self.memory.state_dict(), "loss": self.loss}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.memory.load_state_dict(state["memory"])
        self.loss = state["loss"]
