"""SARSA (Rummery & Niranjan 1994): on-policy TD control with a Q-network.

On a batch of consecutive steps from each env,
  y_t = r_t + gamma * (1 - terminated_t) * Q(s_{t+1}, a_{t+1})
with a_{t+1} the action the policy took next in the same env. Where no such action exists (the
episode was truncated at t, or t is the batch's last step), Q(s_{t+1}, a_{t+1}) is replaced by its
expectation under the current policy, sum_a pi(a|s_{t+1}) Q(s_{t+1}, a).
loss = mean(loss_fn(Q(s_t, a_t), y_t)); exploration by epsilon_greedy or boltzmann schedules.
The metrics row has q_mean, mean(Q(s_t, a_t)), and td_error, mean(|Q(s_t, a_t) - y_t|).
"""

import torch

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.agent.algorithm.config import SARSAConfig
from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.net import net_util
from slm_lab.lib import distribution as D


class SARSA(Algorithm):
    config: SARSAConfig
    STATS = ("q_mean", "td_error")

    def init_nets(self) -> None:
        self.init_q_net()

    def modules(self) -> dict[str, torch.nn.Module]:
        return {"net": self.net}

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q_actions(lambda: self.net(obs)[0], obs)

    def train(self) -> float:
        batch = self.memory.sample(self.device)
        T, N = batch.rewards.shape
        actions = batch.actions.long()
        q_preds = (
            self.net(flat(batch.obs))[0]
            .view(T, N, -1)
            .gather(-1, actions.unsqueeze(-1))
            .squeeze(-1)
        )
        with torch.no_grad(), net_util.eval_mode(self.net):
            next_q_all = self.net(flat(batch.next_obs))[0].view(T, N, -1)
            probs = D.discrete_policy_probs(next_q_all, self.action_policy, self.explore_var.val)
            next_q = (probs * next_q_all).sum(-1)  # expectation, used where a_{t+1} is not known
            taken = next_q_all[:-1].gather(-1, actions[1:].unsqueeze(-1)).squeeze(-1)
            next_q[:-1] = torch.where(batch.dones[:-1], next_q[:-1], taken)
            q_targets = batch.rewards + self.gamma * (1.0 - batch.terminateds.float()) * next_q
        loss = self.loss_fn(q_preds, q_targets)
        self.optimize(loss)
        return self.record(
            loss, q_mean=q_preds.mean(), td_error=(q_preds.detach() - q_targets).abs().mean()
        )
