"""REINFORCE (Williams 1992): Monte-Carlo policy gradient with an optional entropy bonus.

loss = -mean(log pi(a_t|s_t) * R_t) - entropy_coef * mean(H[pi(.|s_t)])
R_t is the discounted return to the episode end (or to the batch end with OnPolicyBatchReplay),
centered by its batch mean when `center_return` is set (a constant baseline).
The metrics row has policy_loss, -mean(log pi(a_t|s_t) * R_t), and entropy, mean(H[pi(.|s_t)]).
"""

from slm_lab.agent.algorithm.config import ReinforceConfig
from slm_lab.agent.algorithm.policy_gradient import PolicyGradient, flat
from slm_lab.lib.math_util import calc_returns


class Reinforce(PolicyGradient):
    config: ReinforceConfig

    def train(self) -> float:
        batch = self.memory.sample(self.device)
        returns = flat(calc_returns(batch.rewards, batch.dones, self.gamma))
        if self.config.center_return:
            returns = returns - returns.mean()
        mean, log_std = self.nets.pdparam(flat(batch.obs))
        log_probs, entropy = self.log_prob_entropy(mean, log_std, flat(batch.actions))
        policy_loss = -(log_probs * returns).mean()
        entropy = entropy.mean()
        loss = policy_loss - self.entropy_coef.val * entropy
        self.optimize(loss)
        return self.record(loss, policy_loss=policy_loss, entropy=entropy)
