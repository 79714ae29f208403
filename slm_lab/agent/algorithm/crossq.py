"""CrossQ (Bhatt et al. 2024): Soft Actor-Critic without target networks.

The critics are normalized with batch renormalization (`agent.critic_net` with
`batch_renorm: true`, typically wider than SAC's), and the critic step feeds the batch's
(s, a) and (s', a'), a' ~ pi(.|s'), through each critic in ONE forward in train mode, so both
halves share the batch statistics:
  [Q_i(s, a); Q_i(s', a')] = Q_i(concat([(s, a), (s', a')]))
  y = r + gamma * (1 - terminated) * (min(Q1, Q2)(s', a') - alpha * log pi(a'|s'))  (no grad)
(discrete: the joint forward is of [s; s'], and y takes the exact expectation over a', as SAC).
The actor step evaluates the critics in eval mode (running statistics, which it does not
update), and a' ~ pi(.|s') is sampled with the actor in eval mode, as in SAC. The paper's other
choices live in the spec: policy_delay 3, Adam with beta1 = 0.5.
"""

import torch

from slm_lab.agent.algorithm.sac import SoftActorCritic
from slm_lab.agent.memory.base import Batch
from slm_lab.agent.net import net_util
from slm_lab.agent.net.config import NetConfig


class CrossQ(SoftActorCritic):
    def init_target_nets(self, critic: NetConfig) -> None:
        """No target nets."""

    def calc_critic_loss(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        obs, actions, next_obs = batch.obs.float(), batch.actions, batch.next_obs.float()
        with torch.no_grad(), net_util.eval_mode(self.actor):
            next_actions, next_log_probs = self.policy(next_obs)
        joint_obs = torch.cat([obs, next_obs])
        joint_actions = None if self.discrete else torch.cat([actions.float(), next_actions])
        q1, next_q1 = self.q_values(self.q1_net, joint_obs, joint_actions).chunk(2)
        q2, next_q2 = self.q_values(self.q2_net, joint_obs, joint_actions).chunk(2)
        with torch.no_grad():
            next_v = self.soft_v(next_q1, next_q2, next_log_probs)
            q_targets = batch.rewards + self.gamma * (1.0 - batch.terminateds.float()) * next_v
        return self.twin_td_loss(self.taken(q1, actions), self.taken(q2, actions), q_targets, batch)
