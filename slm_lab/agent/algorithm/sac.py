"""Soft Actor-Critic (Haarnoja et al. 2018) with automatic entropy tuning; SAC-Discrete
(Christodoulou 2019) for discrete actions.

Policy. Continuous: a tanh-squashed Gaussian, a = tanh(u), u ~ N(mean(s), std(s)), with
state-dependent mean and log-std heads, log-std clamped to [LOG_STD_MIN, LOG_STD_MAX] = [-20, 2]
(the original SAC's parametrization). The env wrapper rescales actions in [-1, 1] to its bounds.
  log pi(a|s) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2),
  log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))  (exact, and finite for any u)
Discrete: pi(.|s) = softmax(logits(s)); expectations over actions are computed exactly.
Discrete with action_pdtype GumbelSoftmax (SLM Lab v4's discrete SAC, which v5's async SAC specs
name; Jang et al. 2017, Maddison et al. 2017): expectations are one-sample estimates as when
continuous, with a ~ pi(.|s) a one-hot vector and Q(s, a) = Q(s, .) . a. The actor's sample is
straight-through: its value is the hard one-hot of argmax(logits + g), g ~ Gumbel(0, 1), its
gradient that of softmax((logits + g) / gumbel_temperature), so that the actor loss reaches the
logits through Q(s, a) as the reparametrized Gaussian does; log pi(a|s) = log_softmax(logits) . a.

For a sampled transition (s, a, r, s') and alpha = exp(log_alpha), the soft value is
  V(s) = E_{a~pi}[min(Q1, Q2)(s, a) - alpha * log pi(a|s)]
(one reparametrized sample when continuous or GumbelSoftmax, the exact sum over actions when
discrete), and
  critic:  y = r + gamma * (1 - terminated) * V_target(s')   (V with the target critics)
           loss = mean(w * (loss_fn(Q1(s, a), y) + loss_fn(Q2(s, a), y)))
  actor:   loss = -mean(V(s)) = mean(E_{a~pi}[alpha * log pi(a|s) - min(Q1, Q2)(s, a)])
  alpha:   loss = -mean(exp(log_alpha) * (E_{a~pi}[log pi(a|s)] + target_entropy))  (no grad to pi)
           then log_alpha <- clamp(log_alpha, log_alpha_min, log_alpha_max)
w the importance-sampling weights of prioritized replay (1 otherwise; the actor and alpha losses
are plain means); the new priorities are the mean of |Q1 - y| and |Q2 - y|. The metrics row has
the critic loss as `loss`, q1_mean and q2_mean (mean Q1(s, a), Q2(s, a) of the trained batches),
and from the actor steps actor_loss, alpha_loss and entropy, -E[log pi]. The temperature
loss uses alpha itself (gradient -alpha * (...) on log_alpha), so the targets and the tuning see
the same alpha; E[log pi] is the sampled log pi when continuous or GumbelSoftmax and
-H(pi(.|s)) exactly when discrete. target_entropy `auto` is -action_dim (continuous) or
DISCRETE_TARGET_ENTROPY_SCALE * log(n) (discrete, GumbelSoftmax too: SAC-Discrete's 0.98; a lower
number in the spec suits tasks that need a near-deterministic policy; v4's -n, below any
discrete entropy, would only ever lower alpha). `fixed_alpha` turns the
tuning off; a fixed alpha is never clamped.

Temperature bounds: log_alpha starts at 0 (alpha 1, moved into the bounds if they exclude it) and
is clamped after each temperature step. The defaults, [LOG_ALPHA_MIN, LOG_ALPHA_MAX] = [-5, 2]
(alpha in [0.0067, 7.39]), are SLM Lab v5's and apply to every spec, as they do in v5: v5 specs
set `log_alpha_min`/`log_alpha_max` only to narrow them, and rely on the ceiling where the entropy
target cannot be met (the temperature loss then raises alpha without limit). Of the shipped
benchmark specs only sac_pendulum's alpha reaches the floor (about 0.007 late in a run); it sets
log_alpha_min -10, keeping the behaviour its benchmark was measured with.

Modes: the critic step runs the critics in train mode and the actor step the actor; the targets
(a' ~ pi(.|s'), the target critics), the critics inside the actor step and acting run in eval
mode (batch norm with its running statistics, which they do not update).

Schedule: the OffPolicy replay schedule; until `training_start_step` frames the agent acts
uniformly at random. Each gradient step updates the critics (counted as one opt_step) and the
target critics (`update_type` polyak with `polyak_coef` after every step, or replace every
`update_frequency` frames); every `policy_delay`-th step also updates the actor and alpha.
"""

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from slm_lab.agent.algorithm.config import SoftActorCriticConfig
from slm_lab.agent.algorithm.off_policy import OffPolicy
from slm_lab.agent.memory.base import Batch
from slm_lab.agent.net import net_util
from slm_lab.agent.net.base import Net
from slm_lab.agent.net.config import NetConfig
from slm_lab.agent.net.registry import build_net
from slm_lab.lib import distribution as D
from slm_lab.lib.distribution import tanh_log_det

DISCRETE_TARGET_ENTROPY_SCALE = 0.98  # target entropy `auto` for n actions: 0.98 * log(n)
DEFAULT_POLYAK_COEF = 0.005
DEFAULT_UPDATE_FREQUENCY = 1  # replace: copy after every gradient step


class LogAlpha(nn.Module):
    """The temperature's log, a module so that it saves and loads with the nets."""

    def __init__(self, value: float, trainable: bool) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(value), requires_grad=trainable)


def squashed_normal_sample(
    mean: torch.Tensor, log_std: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """a = tanh(u), u = mean + std * eps (reparametrized); returns (a, log pi(a|s))."""
    u = D.normal_sample(mean, log_std)
    return torch.tanh(u), D.normal_log_prob(mean, log_std, u) - tanh_log_det(u)


class SoftActorCritic(OffPolicy):
    config: SoftActorCriticConfig
    STATS = ("q1_mean", "q2_mean", "entropy", "actor_loss", "alpha_loss")

    # -- nets ----------------------------------------------------------------------------------
    def init_nets(self) -> None:
        super().init_nets()
        config = self.config
        actor = self.agent_config.net.actor
        critic = (self.agent_config.critic_net or self.agent_config.net).critic
        obs_dim = math.prod(self.obs_shape)
        # continuous: log-std from a second head; discrete: logits
        actor_dims = [self.action_dim] * (1 if self.discrete else 2)
        self.actor = build_net(
            actor, self.obs_shape, actor_dims, [actor.init_std] * len(actor_dims)
        ).to(self.device)
        # continuous: Q(s, a) from concat(s, a); discrete: Q(s, .) for all actions
        critic_in = self.obs_shape if self.discrete else (obs_dim + self.action_dim,)
        critic_out = self.action_dim if self.discrete else 1
        self.q1_net, self.q2_net = (
            build_net(critic, critic_in, [critic_out], [critic.init_std]).to(self.device)
            for _ in range(2)
        )
        self.target = self.init_target_nets(critic)
        # discrete: exact expectations over actions, unless GumbelSoftmax samples them
        self.gumbel = self.discrete and config.action_pdtype == "GumbelSoftmax"
        self.exact = self.discrete and not self.gumbel
        self.unmeasured = torch.tensor(math.nan, device=self.device)  # a step's missing STATS

        self.tune_alpha = config.fixed_alpha is None
        self.log_alpha_min, self.log_alpha_max = config.log_alpha_bounds
        self.log_alpha = LogAlpha(
            min(max(0.0, self.log_alpha_min), self.log_alpha_max)  # alpha 1, within the bounds
            if self.tune_alpha
            else math.log(config.fixed_alpha),
            self.tune_alpha,
        ).to(self.device)
        self.target_entropy = self.calc_target_entropy(config.target_entropy)

        self.actor_params = list(self.actor.parameters())
        self.actor_optim = net_util.build_optim(actor.optim_spec, self.actor_params)
        self.critic_params = [*self.q1_net.parameters(), *self.q2_net.parameters()]
        self.critic_optim = net_util.build_optim(critic.optim_spec, self.critic_params)
        self.optims = [self.actor_optim, self.critic_optim]  # the actor's lr is the `lr` metric
        if self.tune_alpha:  # the actor's optimizer; alpha_lr, when set, for its lr
            self.alpha_optim = net_util.build_optim(
                actor.optim_spec, self.log_alpha.parameters(), lr=config.alpha_lr
            )
            self.optims.append(self.alpha_optim)
        self.lr_schedulers = [
            s
            for s in (
                net_util.build_lr_scheduler(net.lr_scheduler_spec, optim, self.clock)
                for net, optim in ((actor, self.actor_optim), (critic, self.critic_optim))
            )
            if s is not None
        ]
        self.critic_step = net_util.GradStep(
            [self.critic_optim], [(self.critic_params, critic.clip_grad_val)]
        )
        self.actor_step = net_util.GradStep(
            [self.actor_optim], [(self.actor_params, actor.clip_grad_val)]
        )
        if self.tune_alpha:
            self.alpha_step = net_util.GradStep([self.alpha_optim], [])
        self.loss_fn = net_util.build_loss(critic.loss_spec, "none")

    def init_target_nets(self, critic: NetConfig) -> net_util.TargetNets | None:
        """The target critics y is computed with (polyak by default)."""
        return net_util.TargetNets(
            [self.q1_net, self.q2_net],
            critic.update_type or "polyak",
            critic.update_frequency or DEFAULT_UPDATE_FREQUENCY,
            DEFAULT_POLYAK_COEF if critic.polyak_coef is None else critic.polyak_coef,
            self.clock,
        )

    def calc_target_entropy(self, target_entropy: Any) -> float:
        if target_entropy in (None, "auto"):
            if self.discrete:
                return DISCRETE_TARGET_ENTROPY_SCALE * math.log(self.action_dim)
            return -float(self.action_dim)
        if isinstance(target_entropy, int | float) and not isinstance(target_entropy, bool):
            return float(target_entropy)
        raise ValueError(f"target_entropy: expected 'auto' or a number, got {target_entropy!r}")

    def modules(self) -> dict[str, nn.Module]:
        targets = (
            {"target_q1_net": self.target.targets[0], "target_q2_net": self.target.targets[1]}
            if self.target is not None
            else {}
        )
        return {
            "actor": self.actor,
            "q1_net": self.q1_net,
            "q2_net": self.q2_net,
            **targets,
            "log_alpha": self.log_alpha,
        }

    @property
    def alpha(self) -> torch.Tensor:
        """exp(log_alpha), without gradient: what the targets and the actor loss use."""
        return self.log_alpha.value.detach().exp()

    # -- acting --------------------------------------------------------------------------------
    def act(self, obs: Any) -> Any:
        """Uniformly random actions (in [-1, 1] when continuous) until training_start_step."""
        if not self.eval_mode and self.clock.frame < self.config.training_start_step:
            return self.sample_actions()
        return super().act(obs)

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return D.select_discrete(self.actor(obs)[0], self.action_policy, self.explore_var.val)
        mean, log_std = self.pdparam(obs)
        if self.action_policy == "greedy":
            return torch.tanh(mean)
        return squashed_normal_sample(mean, log_std)[0]

    # -- policy and critics ----------------------------------------------------------------------
    def pdparam(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs)
        return mean, log_std.clamp(D.LOG_STD_MIN, D.LOG_STD_MAX)

    def policy(self, obs: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Continuous: (a ~ pi(.|s) [B, act_dim], log pi(a|s) [B]), reparametrized.
        GumbelSoftmax: (one-hot a ~ pi(.|s) [B, n], straight-through; log pi(a|s) [B]).
        Discrete: (None, log pi(.|s) [B, n]) for every action."""
        if self.gumbel:
            logits = self.actor(obs)[0]
            actions = F.gumbel_softmax(logits, tau=self.config.gumbel_temperature, hard=True)
            return actions, (F.log_softmax(logits, dim=-1) * actions).sum(-1)
        if self.discrete:
            return None, F.log_softmax(self.actor(obs)[0], dim=-1)
        return squashed_normal_sample(*self.pdparam(obs))

    def q_values(self, net: Net, obs: torch.Tensor, actions: torch.Tensor | None) -> torch.Tensor:
        """Continuous: Q(s, a) [B]. Discrete: Q(s, .) [B, n] without actions, Q(s, .) . a [B]
        with one-hot actions a (GumbelSoftmax's samples)."""
        if self.discrete:
            q = net(obs)[0]
            return q if actions is None else (q * actions).sum(-1)
        return net(torch.cat([obs.flatten(1), actions], dim=-1))[0].squeeze(-1)

    def taken(self, q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of the batch's actions: a gather over Q(s, .) when discrete."""
        return q.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1) if self.discrete else q

    def expectation(self, log_probs: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """E_{a~pi}[x(a)]: the exact sum over actions when discrete, the sample itself otherwise
        (continuous or GumbelSoftmax)."""
        return (log_probs.exp() * x).sum(-1) if self.exact else x

    def soft_v(self, q1: torch.Tensor, q2: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        """V(s) = E_{a~pi}[min(Q1, Q2)(s, a) - alpha * log pi(a|s)]"""
        return self.expectation(log_probs, torch.min(q1, q2) - self.alpha * log_probs)

    # -- losses --------------------------------------------------------------------------------
    def calc_q_targets(self, batch: Batch) -> torch.Tensor:
        """y = r + gamma * (1 - terminated) * V_target(s'), with the target critics (no grad)."""
        next_obs = batch.next_obs.float()
        target_q1, target_q2 = self.target.targets
        with torch.no_grad(), net_util.eval_mode(self.actor, target_q1, target_q2):
            next_actions, next_log_probs = self.policy(next_obs)
            next_q1 = self.q_values(target_q1, next_obs, next_actions)
            next_q2 = self.q_values(target_q2, next_obs, next_actions)
            next_v = self.soft_v(next_q1, next_q2, next_log_probs)
            return batch.rewards + self.gamma * (1.0 - batch.terminateds.float()) * next_v

    def calc_critic_loss(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, td_errors, mean Q1(s, a), mean Q2(s, a)) of the twin critics on a batch."""
        obs, actions = batch.obs.float(), batch.actions
        q_targets = self.calc_q_targets(batch)
        q_actions = None if self.discrete else actions.float()  # discrete: Q(s, .), then gathered
        q1_preds = self.taken(self.q_values(self.q1_net, obs, q_actions), actions)
        q2_preds = self.taken(self.q_values(self.q2_net, obs, q_actions), actions)
        return self.twin_td_loss(q1_preds, q2_preds, q_targets, batch)

    def twin_td_loss(
        self,
        q1_preds: torch.Tensor,
        q2_preds: torch.Tensor,
        q_targets: torch.Tensor,
        batch: Batch,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        losses = self.loss_fn(q1_preds, q_targets) + self.loss_fn(q2_preds, q_targets)
        td_errors = ((q1_preds - q_targets).abs() + (q2_preds - q_targets).abs()) / 2
        return self.weighted_mean(losses, batch), td_errors, q1_preds.mean(), q2_preds.mean()

    def calc_actor_loss(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actor loss, E_{a~pi}[log pi(a|s)] per sample). Continuous and GumbelSoftmax: the
        gradient reaches the actor through the reparametrized action; discrete: through pi in the
        exact expectation."""
        actions, log_probs = self.policy(obs)
        # the critics are not stepped here: eval mode, their batch statistics left alone
        with (
            torch.set_grad_enabled(not self.exact),  # exact expectation: Q is a constant here
            net_util.eval_mode(self.q1_net, self.q2_net),
        ):
            self.set_critics_grad(False)  # the gradient flows through Q, not into its weights
            q1 = self.q_values(self.q1_net, obs, actions)
            q2 = self.q_values(self.q2_net, obs, actions)
            self.set_critics_grad(True)  # the graph above is built: it stays weight-grad free
        actor_loss = -self.soft_v(q1, q2, log_probs).mean()
        return actor_loss, self.expectation(log_probs, log_probs)

    def set_critics_grad(self, on: bool) -> None:
        for p in self.critic_params:
            p.requires_grad_(on)

    def calc_alpha_loss(self, expected_log_probs: torch.Tensor) -> torch.Tensor:
        """-mean(alpha * (E[log pi] + target_entropy)), alpha = exp(log_alpha) with gradient."""
        return -(
            self.log_alpha.value.exp() * (expected_log_probs + self.target_entropy).detach()
        ).mean()

    # -- training ------------------------------------------------------------------------------
    def train_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        critic_loss, td_errors, q1_mean, q2_mean = self.calc_critic_loss(batch)
        stats = {"loss": critic_loss, **dict.fromkeys(self.STATS, self.unmeasured)}
        if not self.optimize(critic_loss, self.critic_step):  # an opt_step of the clock
            return stats
        stats.update(q1_mean=q1_mean, q2_mean=q2_mean)
        self.update_priorities(batch, td_errors)
        if self.target is not None:
            self.target.update()
        if self.clock.opt_step % self.config.policy_delay == 0:
            actor_loss, expected_log_probs = self.calc_actor_loss(batch.obs.float())
            self.optimize(actor_loss, self.actor_step, count=False)
            stats.update(actor_loss=actor_loss, entropy=-expected_log_probs.mean())
            if self.tune_alpha:
                alpha_loss = self.calc_alpha_loss(expected_log_probs)
                self.optimize(alpha_loss, self.alpha_step, count=False)
                with torch.no_grad():
                    self.log_alpha.value.clamp_(self.log_alpha_min, self.log_alpha_max)
                stats["alpha_loss"] = alpha_loss
        return stats

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "alpha": self.alpha.item()}
