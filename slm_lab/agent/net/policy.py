"""Actor and critic nets for policy-gradient algorithms, shared or separate, from a net spec."""

import torch
from torch import nn

from slm_lab.agent.net.base import Net
from slm_lab.agent.net.config import NetConfig, NetSpec
from slm_lab.agent.net.registry import build_net


class PolicyNets(nn.Module):
    """pdparam(obs) -> (logits or mean, log_std or None); value(obs) -> V(obs).

    `shared: true` puts policy and value heads on one body; otherwise actor and critic are
    separate nets of the spec's `type`, each configured by its `actor_`/`critic_` keys.
    `obs_shape` is the shape of one observation.
    A continuous policy has a state-independent log-std when `log_std_init` is set, else a
    log-std head.
    """

    def __init__(
        self,
        net: NetSpec,
        obs_shape: tuple[int, ...] | int,
        discrete: bool,
        action_dim: int,
        with_critic: bool,
    ) -> None:
        super().__init__()
        in_shape = tuple(obs_shape)
        self.actor_spec, self.critic_spec = net.actor, net.critic
        self.discrete = discrete
        self.shared = net.base.shared and with_critic
        self.with_critic = with_critic
        state_independent_std = not discrete and self.actor_spec.log_std_init is not None
        pd_dims = [action_dim] if discrete or state_independent_std else [action_dim, action_dim]
        actor_gain = self.actor_spec.init_std
        critic_gain = self.critic_spec.init_std
        log_std_dim = action_dim if state_independent_std else 0
        if self.shared:
            self.net = build_net(
                self.actor_spec,
                in_shape,
                pd_dims + [1],
                [actor_gain] * len(pd_dims) + [critic_gain],
                log_std_dim,
            )
        else:
            self.actor = build_net(
                self.actor_spec, in_shape, pd_dims, [actor_gain] * len(pd_dims), log_std_dim
            )
            if with_critic:
                self.critic = build_net(self.critic_spec, in_shape, [1], [critic_gain])
        self.n_pd = len(pd_dims)

    def _split(
        self, outs: list[torch.Tensor], net: Net
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.discrete:
            return outs[0], None
        if net.log_std is not None:
            return outs[0], net.log_std.expand_as(outs[0])
        return outs[0], outs[1].clamp(-20.0, 2.0)

    def pdparam(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        net = self.net if self.shared else self.actor
        return self._split(net(obs)[: self.n_pd], net)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        if self.shared:
            return self.net(obs)[-1].squeeze(-1)
        return self.critic(obs)[0].squeeze(-1)

    def pdparam_value(
        self, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        if self.shared:
            outs = self.net(obs)
            mean, log_std = self._split(outs[: self.n_pd], self.net)
            return mean, log_std, outs[-1].squeeze(-1)
        mean, log_std = self.pdparam(obs)
        return mean, log_std, self.value(obs)

    def parts(self) -> list[tuple[nn.Module, NetConfig]]:
        """(net, its spec) pairs, for optimizers and gradient clipping."""
        if self.shared:
            return [(self.net, self.actor_spec)]
        parts = [(self.actor, self.actor_spec)]
        if self.with_critic:
            parts.append((self.critic, self.critic_spec))
        return parts
