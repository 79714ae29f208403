"""Return and advantage estimators on time-major batches of shape [T, N] (N parallel envs).

Conventions shared by every function here:
- `rewards[t]` is the reward of the transition from s_t.
- `terminateds[t]` is True when s_{t+1} is terminal: nothing to bootstrap from.
- `dones[t]` is True when the episode ended at step t for any reason (terminated or truncated);
  it cuts the recursion so that no return flows across an episode boundary.
- `next_values[t]` is V(s_{t+1}) of the real next state (for a truncated episode, its true final
  observation), so truncation bootstraps and termination does not.
"""

import math
from collections.abc import Iterable

import torch

PERCENTILE_SCALE_QUANTILES = (0.05, 0.95)  # DreamerV3's low and high percentiles
PERCENTILE_SCALE_MIN = 1.0  # the divisor's floor: a spread under 1 is left as it is


def calc_returns(
    rewards: torch.Tensor, dones: torch.Tensor, gamma: float, bootstrap: float = 0.0
) -> torch.Tensor:
    """Monte-Carlo discounted returns R_t = r_t + gamma * (1 - done_t) * R_{t+1}, reset at
    every episode end; `bootstrap` is R after the last step (a value estimate, or 0)."""
    returns = torch.empty_like(rewards)
    future = torch.full_like(rewards[0], bootstrap)
    not_dones = 1.0 - dones.float()
    for t in reversed(range(rewards.shape[0])):
        future = rewards[t] + gamma * future * not_dones[t]
        returns[t] = future
    return returns


def calc_gaes(
    rewards: torch.Tensor,
    terminateds: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalized advantage estimation (Schulman et al. 2016).

    delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
    A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
    """
    deltas = rewards + gamma * (1.0 - terminateds.float()) * next_values - values
    not_dones = 1.0 - dones.float()
    advs = torch.empty_like(rewards)
    future_adv = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        future_adv = deltas[t] + gamma * lam * not_dones[t] * future_adv
        advs[t] = future_adv
    return advs


def calc_nstep_returns(
    rewards: torch.Tensor,
    terminateds: torch.Tensor,
    dones: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    n: int,
) -> torch.Tensor:
    """n-step returns: R_t = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - term) V(s_{t+m}).

    m = min(n, steps to the episode end, steps to the end of the batch): the sum stops at an
    episode end (bootstrapping only on truncation) and at the batch end (bootstrapping from V).
    """
    T = rewards.shape[0]
    boots = (1.0 - terminateds.float()) * next_values  # value after step t, 0 if terminal
    dones_f = dones.float()
    returns = torch.empty_like(rewards)
    for t in range(T):
        ret = torch.zeros_like(rewards[0])
        discount = torch.ones_like(rewards[0])
        alive = torch.ones_like(rewards[0])  # 1 while no episode end has been crossed
        last = min(t + n, T) - 1
        for k in range(t, last + 1):
            ret = ret + alive * discount * rewards[k]
            discount = discount * gamma
            # bootstrap where the episode ends at k, or at the window's last step
            stop_here = dones_f[k] if k < last else torch.ones_like(dones_f[k])
            ret = ret + alive * stop_here * discount * boots[k]
            alive = alive * (1.0 - stop_here)
        returns[t] = ret
    return returns


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    return (x - x.mean()) / (x.std() + eps)


def finite_mean(values: Iterable[float]) -> float:
    """The mean of the finite values; NaN when there is none."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def explained_variance(v_preds: torch.Tensor, v_targets: torch.Tensor) -> torch.Tensor:
    """1 - Var[V_target - V] / Var[V_target]: 1 for a perfect critic, 0 for one no better than
    a constant, negative for a worse one; NaN when the targets do not vary."""
    var_targets = v_targets.var()
    return torch.where(var_targets > 0, 1.0 - (v_targets - v_preds).var() / var_targets, torch.nan)


class RunningMeanStd:
    """Running mean/variance (parallel Welford) of a scalar stream, as a torch state."""

    def __init__(self, epsilon: float = 1e-4) -> None:
        self.mean = 0.0
        self.var = 1.0
        self.count = epsilon

    def update(self, x: torch.Tensor) -> None:
        batch_mean, batch_var, batch_count = (
            x.mean().item(),
            x.var(unbiased=False).item(),
            x.numel(),
        )
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean += delta * batch_count / total
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta**2 * self.count * batch_count / total
        )
        self.var = m2 / total
        self.count = total

    @property
    def std(self) -> float:
        return (self.var + 1e-8) ** 0.5

    def state_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.mean, self.var, self.count = state["mean"], state["var"], state["count"]


class PercentileScale:
    """DreamerV3's return scale (Hafner et al. 2023), applied to advantages as SLM Lab v5 does
    (PPO: the percentiles of each minibatch's advantages, where DreamerV3 takes those of returns):
      P5 <- decay * P5 + (1 - decay) * quantile(x, 0.05)   (both EMAs start at 0, as DreamerV3's)
      P95 <- decay * P95 + (1 - decay) * quantile(x, 0.95)
      x / max(1, P95 - P5)   (not centered: only a spread wider than 1 is scaled down)
    The EMAs stay on x's device, so an update costs no host sync."""

    def __init__(self, decay: float, device: torch.device) -> None:
        self.decay = decay
        self.quantiles = torch.tensor(PERCENTILE_SCALE_QUANTILES, device=device)
        self.percentiles = torch.zeros(len(PERCENTILE_SCALE_QUANTILES), device=device)  # P5, P95

    def update(self, x: torch.Tensor) -> None:
        self.percentiles.lerp_(torch.quantile(x, self.quantiles), 1.0 - self.decay)

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        low, high = self.percentiles
        return x / (high - low).clamp(min=PERCENTILE_SCALE_MIN)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"percentiles": self.percentiles.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.percentiles.copy_(state["percentiles"])
