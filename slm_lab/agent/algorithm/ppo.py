"""Proximal Policy Optimization, clipped surrogate (Schulman et al. 2017).

Each training call uses one batch of `time_horizon x num_unrolls` steps from every env:
  1. with the policy that collected it: old log-probs, V(s_t), V(s_{t+1}); GAE advantages and
     value targets V_target = A + V(s_t). With a shared actor-critic net the acting forward
     gives V(s_t) too, so the log-probs and values acting computed are kept at their batch rows
     (as Stable-Baselines3 and CleanRL do) instead of a second pass over the batch; equal up
     to float rounding (the batch's forward is one GEMM shape, acting's another). The
     checkpoint holds those of the batch in progress, so a resume continues it exactly; a
     batch with rows that have none (a checkpoint written before they were kept) takes the pass.
  2. `training_epoch` passes over the batch, shuffled and split into batch_size // minibatch_size
     minibatches of `minibatch_size`; the last one also takes the leftover batch_size %
     minibatch_size samples, so every step sees a full minibatch and every epoch the whole batch:
       ratio = exp(log pi(a|s) - log pi_old(a|s))
       A scaled per minibatch by `normalize_advantages` (SLM Lab v5.2):
         standardize (the default): A <- (A - mean(A)) / std(A); undefined for one sample, so
           validation refuses minibatch_size 1 with it (the leftover is merged into the last
           minibatch, so every minibatch has at least minibatch_size samples)
         percentile (SLM Lab v5's): EMAs (decay PERCENTILE_EMA_DECAY) of the minibatch's 5th and
           95th percentiles, P5 and P95, then A <- A / max(1, P95 - P5), not centered. DreamerV3's
           scale, but of advantages updated every minibatch, where DreamerV3 takes percentiles of
           returns once per batch
       `normalize_advs` false (default true, as SLM Lab v5's PPO) uses A as computed and
       contradicts a `normalize_advantages` (a spec error); true or absent leaves the choice to it.
       The percentile EMAs are part of the algorithm's state, so a resume continues them.
       policy_loss = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
       val_loss = loss_fn(V, V_target) (MSELoss: the mean squared error, no 1/2), or with
       `clip_vloss` 1/2 the mean of the larger of the clipped and unclipped squared errors, V
       clipped to within eps of the old V. The two paths weigh the value loss as SLM Lab v5
       and CleanRL do (CleanRL's unclipped path has the 1/2 too; v5's has not), so a
       `val_loss_coef` copied from a v5 spec means the same here
       loss = policy_loss - entropy_coef * H + val_loss_coef * val_loss
     With `recompute_advs` each epoch after the first starts by computing A and V_target again,
     with the critic as the last epoch left it (a no-grad pass over the batch for V(s_t) and
     V(s_{t+1}); Tianshou's recompute_advantage, recommended by Andrychowicz et al. 2021); the
     value normalizer is not updated again, so the critic's units stay the call's, and
     clip_vloss clips around the values the batch was collected with.
     Stopping early when the approximate KL, E[(ratio - 1) - log ratio] over the epoch's last
     minibatch, passes `target_kl` (if set).
The metrics row has, for the training call:
  loss, policy_loss, value_loss (val_loss), entropy: means over its minibatches
  approx_kl = E[(ratio - 1) - log ratio] (as CleanRL) and clip_frac, the fraction of samples
    whose ratio the clip moved (|ratio - 1| > eps): over every sample of its minibatches, the
    same as the mean over minibatches of one size (the ratios are kept and reduced once per
    call, cheaper than a reduction per minibatch)
  explained_variance = 1 - Var[V_target - V] / Var[V_target] over the batch, V the values it
    was collected with (as CleanRL and Stable-Baselines3 report it)
"""

from typing import Any

import torch

from slm_lab.agent.algorithm.actor_critic import ActorCritic
from slm_lab.agent.algorithm.config import PPOConfig
from slm_lab.agent.algorithm.policy_gradient import flat
from slm_lab.agent.memory.base import Batch, Transition
from slm_lab.agent.net import net_util
from slm_lab.lib.math_util import PercentileScale, explained_variance, normalize
from slm_lab.lib.schedule import VarScheduler

DEFAULT_CLIP_EPS = 0.2  # the clip range without a clip_eps_spec (Schulman et al. 2017)
PERCENTILE_EMA_DECAY = 0.99  # DreamerV3's


def minibatch_idxs(
    batch_size: int, minibatch_size: int, device: torch.device
) -> tuple[torch.Tensor, ...]:
    """A shuffle of range(batch_size) in batch_size // minibatch_size minibatches of
    minibatch_size, the last one holding minibatch_size + the leftover."""
    perm = torch.randperm(batch_size, device=device)
    return perm.tensor_split(
        list(range(minibatch_size, batch_size - minibatch_size + 1, minibatch_size))
    )


def approx_kl(ratios: torch.Tensor, log_ratios: torch.Tensor) -> torch.Tensor:
    """E[(ratio - 1) - log ratio], an unbiased, non-negative estimate of KL(pi_old || pi)."""
    return ((ratios - 1.0) - log_ratios).mean()


def clip_frac(ratios: torch.Tensor, clipped_ratios: torch.Tensor) -> torch.Tensor:
    """The fraction of samples whose ratio the clip moved: |ratio - 1| > eps."""
    return (clipped_ratios != ratios).float().mean()


class PPO(ActorCritic):
    config: PPOConfig
    STATS = (
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_frac",
        "explained_variance",
    )

    def init_nets(self) -> None:
        super().init_nets()
        self.clip_eps = VarScheduler(
            self.config.clip_eps_spec, self.clock.max_frame, default=DEFAULT_CLIP_EPS
        )
        # null normalize_advs: normalized, as SLM Lab v5's PPO always did
        self.adv_normalizer: str | None = (
            None
            if self.config.normalize_advs is False
            else self.config.normalize_advantages or "standardize"
        )
        self.adv_scale = (
            PercentileScale(PERCENTILE_EMA_DECAY, self.device)
            if self.adv_normalizer == "percentile"
            else None
        )
        # a shared body's acting forward gives log pi(a|s) and V(s) of every step: kept at the
        # step's batch row (see the docstring); rows [0, kept_rows) hold them
        self.keep_acted = self.nets.shared
        self.acted: tuple[torch.Tensor, torch.Tensor] | None = None  # the last act's
        self.kept_rows = 0
        if self.keep_acted:
            shape = (self.batch_steps(), self.env_info.num_envs)
            self.kept_log_probs = torch.zeros(shape, device=self.device)
            self.kept_v_preds = torch.zeros(shape, device=self.device)

    def batch_steps(self) -> int:
        return self.config.time_horizon * self.config.num_unrolls

    def select_actions(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.keep_acted or self.eval_mode:
            return super().select_actions(obs)
        mean, log_std, v_preds = self.nets.pdparam_value(obs)
        actions = self.policy_actions(mean, log_std)
        self.acted = (self.log_prob(mean, log_std, actions), v_preds)
        return actions

    def update(self, t: Transition) -> None:
        if self.acted is not None and self.kept_rows == self.memory.ptr:  # the row t goes to
            self.kept_log_probs[self.kept_rows], self.kept_v_preds[self.kept_rows] = self.acted
            self.kept_rows += 1
        self.acted = None
        super().update(t)

    def old_log_probs_values(
        self, obs: torch.Tensor, actions: torch.Tensor, T: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi_old(a|s) and V_old(s) (the net's units) of the batch, flat: those acting
        computed when every row has them, else one no-grad pass."""
        kept, self.kept_rows = self.kept_rows, 0
        if kept == T:
            return flat(self.kept_log_probs), flat(self.kept_v_preds)
        with torch.no_grad(), net_util.eval_mode(self.nets):
            mean, log_std, v_preds = self.nets.pdparam_value(obs)
            return self.log_prob(mean, log_std, actions), v_preds

    def train_actor_critic(self) -> float:
        config = self.config
        batch = self.memory.sample(self.device)
        T, N = batch.rewards.shape
        # the observations as stored: the training minibatches of a uint8 batch of frames are
        # made float one at a time, by the net (2048 stacked Atari frames are 231 MB as float32;
        # the no-grad pass of old_log_probs_values, when it runs, takes the whole batch); rows
        # taken by index_select (256 uint8 stacks: 0.4 ms, where obs[idx] took 4.7 ms)
        obs, actions = flat(batch.obs), flat(batch.actions)
        old_log_probs, old_v_preds = self.old_log_probs_values(obs, actions, T)
        with torch.no_grad(), net_util.eval_mode(self.nets):  # V(s_{t+1}) as V(s_t) was computed
            values = self.denorm_v(old_v_preds).view(T, N)
            advs, v_targets = self.calc_advs_v_targets(batch, values)
        advs, v_targets = flat(advs), flat(v_targets)
        if self.normalize_v_targets:
            self.v_rms.update(v_targets)
        v_targets = self.norm_v(v_targets)
        old_v_preds = self.norm_v(flat(values))  # the old predictions in the targets' (new) units
        explained_var = explained_variance(old_v_preds, v_targets)  # the rollout's

        eps = self.clip_eps.val
        ent_coef = self.entropy_coef.val
        batch_size = obs.shape[0]
        mb_losses = []  # per minibatch: [loss, policy_loss, val_loss, entropy]
        mb_ratios = []  # per minibatch: (ratios, clipped_ratios, log_ratios)
        for epoch in range(config.training_epoch):
            if epoch and config.recompute_advs:
                advs, v_targets = self.current_advs_v_targets(batch, obs)
            for idx in minibatch_idxs(batch_size, config.minibatch_size, self.device):
                mean, log_std, v_preds = self.nets.pdparam_value(obs.index_select(0, idx))
                log_probs, entropy = self.log_prob_entropy(mean, log_std, actions[idx])
                log_ratios = log_probs - old_log_probs[idx]
                ratios = log_ratios.exp()
                clipped_ratios = ratios.clamp(1.0 - eps, 1.0 + eps)
                mb_advs = self.normalize_advs(advs[idx])
                surr1 = ratios * mb_advs
                surr2 = clipped_ratios * mb_advs
                policy_loss = -torch.min(surr1, surr2).mean()
                if config.clip_vloss:
                    old_v = old_v_preds[idx]
                    v_clipped = old_v + (v_preds - old_v).clamp(-eps, eps)
                    val_loss = (
                        0.5
                        * torch.max(
                            (v_preds - v_targets[idx]).pow(2), (v_clipped - v_targets[idx]).pow(2)
                        ).mean()
                    )
                else:
                    val_loss = self.loss_fn(v_preds, v_targets[idx])
                entropy = entropy.mean()
                loss = policy_loss - ent_coef * entropy + config.val_loss_coef * val_loss
                self.optimize(loss)
                with torch.no_grad():
                    mb_losses.append(torch.stack([loss, policy_loss, val_loss, entropy]))
                mb_ratios.append((ratios.detach(), clipped_ratios.detach(), log_ratios.detach()))
            if config.target_kl is not None:
                with torch.no_grad():
                    if approx_kl(ratios, log_ratios).item() > config.target_kl:
                        break
        with torch.no_grad():
            loss, policy_loss, val_loss, entropy = torch.stack(mb_losses).mean(0).unbind()
            ratios, clipped_ratios, log_ratios = (
                torch.cat(x) for x in zip(*mb_ratios, strict=True)
            )
        return self.record(
            loss,
            policy_loss=policy_loss,
            value_loss=val_loss,
            entropy=entropy,
            approx_kl=approx_kl(ratios, log_ratios),
            clip_frac=clip_frac(ratios, clipped_ratios),
            explained_variance=explained_var,
        )

    def current_advs_v_targets(
        self, batch: Batch, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's advantages and value targets (in the critic's units), flat, from the
        critic as it is now."""
        T, N = batch.rewards.shape
        with torch.no_grad(), net_util.eval_mode(self.nets):
            values = self.denorm_v(self.nets.value(obs)).view(T, N)
            advs, v_targets = self.calc_advs_v_targets(batch, values)
        return flat(advs), self.norm_v(flat(v_targets))

    def normalize_advs(self, advs: torch.Tensor) -> torch.Tensor:
        """A minibatch's advantages as the policy loss takes them (`normalize_advantages`)."""
        if self.adv_normalizer == "standardize":
            return normalize(advs)
        if self.adv_scale is not None:
            self.adv_scale.update(advs)
            return self.adv_scale.scale(advs)
        return advs

    def update_schedules(self) -> None:
        super().update_schedules()
        self.clip_eps.update(self.clock.frame, self.eval_mode)

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "clip_eps": self.clip_eps.val}

    def extra_state(self) -> dict[str, Any]:
        state = super().extra_state()
        if self.adv_scale is not None:
            state["adv_scale"] = self.adv_scale.state_dict()
        if self.keep_acted:  # the batch in progress: a resume continues it as if never stopped
            rows = self.kept_rows
            state["kept"] = {  # copies: the rows are rewritten by the next batch
                "log_probs": self.kept_log_probs[:rows].to("cpu", copy=True),
                "v_preds": self.kept_v_preds[:rows].to("cpu", copy=True),
            }
        return state

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        if self.adv_scale is not None:
            self.adv_scale.load_state_dict(state["adv_scale"])
        # a checkpoint without kept rows (written before they were kept): the batch takes the pass
        kept = state.get("kept") if self.keep_acted else None
        self.kept_rows = 0 if kept is None else len(kept["log_probs"])
        if kept is not None:
            self.kept_log_probs[: self.kept_rows] = kept["log_probs"]
            self.kept_v_preds[: self.kept_rows] = kept["v_preds"]
