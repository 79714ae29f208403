"""The floor of a training run: what no implementation can avoid, in three parts, against SLM
Lab's and Stable-Baselines3's whole processes.

For each work (a bench/vs_sb3.py record: the same settings for SLM Lab's spec and SB3's model),
`run` measures, every process with one torch thread (OMP_NUM_THREADS=MKL_NUM_THREADS=1):

- start-up: the whole process `python -c "import torch, gymnasium; os._exit(0)"` (and
  `import mujoco` for a MuJoCo env, `import ale_py` for an ALE game): the interpreter and the
  imports any implementation pays, ended without the interpreter's teardown of those modules
  (about 0.5 s here), which a process can skip as `slm-lab` does;
- env: the same vector env as SLM Lab builds it for one process (Gymnasium's sync vector env,
  same-step autoreset; for an ALE game ale-py's native vector env with SLM Lab's options and
  ALE threads), built, reset and stepped for the run's vector steps with actions drawn before
  the clock starts (building and the first reset are paid by every implementation: 16 Pong
  games take seconds; the building and first reset alone are `env_build` in the report);
- arithmetic: the same torch calls in the same shapes and counts on fixed tensors, no env, no
  framework, denormals flushed: the acting forwards and every training forward, backward and
  optimizer step (fused Adam, as SLM Lab builds it). Each count comes from the spec, as the
  algorithm uses it (see `Plan` and the `plan_*` functions; `run` prints them). `ppo_pong`
  (ppo_atari on ALE/Pong-v5 x16) runs the spec's Nature CNN, policy and value heads on one
  body, on uint8 frames scaled as SLM Lab's ConvNet does (channels_last), with its clipped
  value loss and fused AdamW;

the floor is their sum (the env and arithmetic children time their work alone, so their own
start-up is not counted twice). Every figure is given in CPU seconds (a process's own and its
waited-for children's, from wait4; in a child, process_time) and in wall seconds: on a machine
shared with other work the CPU seconds are the steadier of the two. Then SLM Lab's whole process
(`slm-lab run <spec> train`, one session, --log-level WARNING, in a temporary folder) and SB3's
(`bench/vs_sb3.py sb3 WORK`, a user's script), the three A/B/C interleaved (the order rotates
each round), and the ratios of each whole process to the floor. `profile` runs one SLM Lab
session in a child process with timers around the session's parts (start-up, building and the
first reset, env steps, acting, training, the rest of the agent's update, recording,
checkpoints, the session's analysis) and prints them beside the floor's parts and the whole
`slm-lab run` process. Raw numbers go to bench/out/floor_<work>.json.

usage: uv run --group bench python bench/floor.py run ppo_cartpole [--frames-scale 0.2] [--rounds 2]
       uv run --group bench python bench/floor.py run ppo_pong [--frames-scale 0.5] [--rounds 1]
       uv run --group bench python bench/floor.py profile dqn_cartpole [--frames-scale 0.4]
       uv run --group bench python bench/floor.py plan sac_pendulum
"""

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from vs_sb3 import COMPARISONS, OUT_DIR, ROOT
from whole_process import (
    PYTHON,
    TIMED_MODULES,
    line_after,
    monotonic,
    require_bytecode,
    run_process,
    slm_lab_run_cmd,
    write_report,
    write_spec_file,
)

THIS = Path(__file__).resolve()
MUJOCO_ENVS = ("Hopper-v5",)
ALE_PREFIX = "ALE/"  # ale-py's games: its native vector env, as SLM Lab's Atari backend steps
PARTS = ("startup", "env", "arithmetic")
WORK_NAMES = ("ppo_cartpole", "dqn_cartpole", "sac_pendulum", "ppo_hopper", "ppo_pong")
CLOCKS = ("cpu", "wall")  # CPU seconds first: steadier than the wall on a shared machine


def now() -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds), to take differences of."""
    return time.process_time(), time.perf_counter()


def since(start: tuple[float, float]) -> dict[str, float]:
    cpu, wall = now()
    return {"cpu": cpu - start[0], "wall": wall - start[1]}


# -- what the arithmetic does, derived from the spec -----------------------------------------
@dataclass(frozen=True)
class Plan:
    """The floor's shapes and counts for one run of a spec."""

    algo: str  # "ppo", "dqn" or "sac"
    env_id: str
    num_envs: int
    vector_steps: int  # env steps of the vector env: ceil(frames / num_envs)
    obs_dim: int
    obs_shape: tuple[int, ...]  # one observation's: [obs_dim], or frames (C, H, W) for a conv net
    act_dim: int  # discrete: the number of actions; continuous: the action's size
    discrete: bool
    hid_layers: list[int]  # an MLP's, or a ConvNet's fc layers after its convolutions
    activation: str  # "tanh" or "relu"
    act_calls: int  # acting forwards (each on [num_envs, obs_dim])
    train_calls: int  # training calls
    train_steps: int  # gradient steps over all training calls
    batch: int  # rows of a gradient step's minibatch
    horizon: int = 0  # PPO: vector steps a training call's GAE runs back over
    clip_grad: float | None = None
    gamma: float = 0.99
    # a ConvNet's conv_hid_layers rows [out_channels, kernel, stride, padding, dilation] on uint8
    # frames (scaled by 1/255, channels_last, as SLM Lab's ConvNet); none: an MLP on floats
    conv_layers: list[list[int]] = field(default_factory=list)
    shared: bool = False  # PPO: policy and value heads on one body (one forward for both)
    clip_vloss: bool = False  # PPO: values clipped to within clip_eps of the acting ones
    clip_eps: float = 0.2  # PPO's ratio clip (and the values' with clip_vloss)
    optim: str = "Adam"  # "Adam" or "AdamW" (torch's weight decay 0.01), fused as SLM Lab builds it
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # ALE: the native env's options
    derivation: str = ""  # how the counts follow from the spec, printed by `plan`


def vector_env(env_id: str, num_envs: int, **kwargs: Any) -> Any:
    """The vector env SLM Lab steps for env_id in one process, same-step autoreset: ale-py's
    native vector env of an ALE game (with `kwargs`, the native env's options), else
    Gymnasium's sync vector env."""
    import gymnasium as gym

    same_step = gym.vector.AutoresetMode.SAME_STEP
    if env_id.startswith(ALE_PREFIX):
        import ale_py

        gym.register_envs(ale_py)
        return gym.make_vec(
            env_id,
            num_envs,
            vectorization_mode="vector_entry_point",
            autoreset_mode=same_step,
            **kwargs,
        )
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": same_step},
    )


def space_dims(env_id: str) -> tuple[tuple[int, ...], int, bool]:
    """(one observation's shape, action count or size, discrete) of the env SLM Lab builds."""
    import gymnasium as gym

    vec = vector_env(env_id, 1)
    obs_shape = tuple(int(d) for d in vec.single_observation_space.shape)
    space = vec.single_action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    act_dim = int(space.n) if discrete else int(math.prod(space.shape))
    vec.close()
    return obs_shape, act_dim, discrete


def ale_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    """The native env's options SLM Lab's Atari backend sets for the spec's env section (its
    own `_native_kwargs`: no clipping, no episodic life in ALE, the game's limit a step past
    SLM Lab's time limit); ALE's threads are chosen at launch (`child_env`)."""
    from slm_lab.env import atari_backend
    from slm_lab.env.config import EnvConfig
    from slm_lab.lib.config import parse

    return atari_backend._native_kwargs(parse(EnvConfig, spec["env"], "env"))


def spec_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """The Plan's fields that every algorithm reads the same way from the spec and the env."""
    env_id = spec["env"]["name"]
    obs_shape, act_dim, discrete = space_dims(env_id)
    net = spec["agent"]["net"]
    conv = net["type"] == "ConvNet"
    return {
        "env_id": env_id,
        "num_envs": spec["env"]["num_envs"],
        "obs_dim": math.prod(obs_shape),
        "obs_shape": obs_shape,
        "act_dim": act_dim,
        "discrete": discrete,
        "hid_layers": net["fc_hid_layers"] if conv else net["hid_layers"],
        "activation": net["hid_layers_activation"],
        "gamma": spec["agent"]["algorithm"]["gamma"],
        "conv_layers": net["conv_hid_layers"] if conv else [],
        "env_kwargs": ale_kwargs(spec) if env_id.startswith(ALE_PREFIX) else {},
    }


def plan_ppo(spec: dict[str, Any], frames: int) -> Plan:
    a, net, n = spec["agent"]["algorithm"], spec["agent"]["net"], spec["env"]["num_envs"]
    horizon, minibatch, epochs = a["time_horizon"], a["minibatch_size"], a["training_epoch"]
    batch = horizon * n
    calls = frames // batch
    per_call = epochs * math.ceil(batch / minibatch)
    shared = net.get("shared", False)
    optim = net.get("optim_spec") or net.get("actor_optim_spec") or {"name": "Adam"}
    fields = spec_fields(spec)
    body = f"{len(fields['conv_layers'])} conv + " if fields["conv_layers"] else ""
    body += f"{len(fields['hid_layers'])} linear layers"
    nets = (
        f"one forward of the shared body ({body}) with policy and value heads"
        if shared
        else f"one actor and one critic forward ({body} each)"
    )
    vloss = "clipped value loss" if a.get("clip_vloss") else "value loss"
    return Plan(
        algo="ppo",
        vector_steps=math.ceil(frames / n),
        **fields,
        act_calls=math.ceil(frames / n),
        train_calls=calls,
        train_steps=calls * per_call,
        batch=minibatch,
        horizon=horizon,
        clip_grad=net["clip_grad_val"],
        shared=shared,
        clip_vloss=a.get("clip_vloss", False),
        clip_eps=a.get("clip_eps_spec", {}).get("start_val", 0.2),
        optim=optim["name"],
        derivation=(
            f"acting: {nets} per vector step on [{n}, {', '.join(map(str, fields['obs_shape']))}], "
            f"ceil({frames} / num_envs {n}); training: a call per time_horizon {horizon} x "
            f"num_envs {n} = {batch} frames ({frames} // {batch} = {calls}, a partial batch "
            f"untrained), each a value forward for V(s_T), GAE back over {horizon} steps and "
            f"training_epoch {epochs} x ceil({batch} / minibatch_size {minibatch}) = {per_call} "
            f"minibatch steps (rows gathered from the batch, forward, PPO loss with {vloss}, "
            f"backward, grad-norm clip, one fused {optim['name']} step)"
        ),
    )


def linear_sum(start: float, end: float, start_step: float, end_step: float, frames: int) -> float:
    """Sum over frames 0..frames-1 of 1 - epsilon(t), epsilon linear from start to end between
    start_step and end_step, flat outside: the expected number of greedy (net-chosen) actions."""
    total = 0.0
    for t in range(frames):
        frac = min(max((t - start_step) / max(end_step - start_step, 1), 0.0), 1.0)
        total += 1.0 - (start + (end - start) * frac)
    return total


def plan_dqn(spec: dict[str, Any], frames: int) -> Plan:
    a, net, mem = spec["agent"]["algorithm"], spec["agent"]["net"], spec["agent"]["memory"]
    start, freq = a["training_start_step"], a["training_frequency"]
    per_call = a["training_iter"] * a.get("training_batch_iter", 1)
    calls = (frames - start) // freq + 1 if frames >= start else 0
    e = a["explore_var_spec"]
    greedy = round(linear_sum(e["start_val"], e["end_val"], e["start_step"], e["end_step"], frames))
    return Plan(
        algo="dqn",
        vector_steps=frames,
        **spec_fields(spec),
        act_calls=greedy,
        train_calls=calls,
        train_steps=calls * per_call,
        batch=mem["batch_size"],
        clip_grad=net["clip_grad_val"],
        derivation=(
            f"acting: a Q forward for each greedy action only, the sum over {frames} frames of "
            f"1 - epsilon (linear {e['start_val']} -> {e['end_val']} over frames "
            f"{e['start_step']}..{e['end_step']:g}) = {greedy}; training: a call every "
            f"training_frequency {freq} frames from training_start_step {start} "
            f"({calls} calls), each training_iter x training_batch_iter = {per_call} gradient "
            f"steps on batch_size {mem['batch_size']} (a replay gather, online and target "
            "forwards, Huber loss, backward, grad-norm clip, fused Adam) and one target copy "
            "(the net changes only inside a call)"
        ),
    )


def plan_sac(spec: dict[str, Any], frames: int) -> Plan:
    a, mem = spec["agent"]["algorithm"], spec["agent"]["memory"]
    start = a["training_start_step"]
    acting = max(frames - start, 0)
    steps = acting // a["training_frequency"] * a["training_iter"]
    return Plan(
        algo="sac",
        vector_steps=frames,
        **spec_fields(spec),
        act_calls=acting,
        train_calls=steps,
        train_steps=steps,
        batch=mem["batch_size"],
        derivation=(
            f"acting: uniform random actions (no forward) for training_start_step {start} "
            f"frames, then an actor forward and a squashed sample per frame ({acting}); "
            f"training: training_iter {a['training_iter']} gradient step per "
            f"training_frequency {a['training_frequency']} frame after the start ({steps}), each "
            f"on batch_size {mem['batch_size']}: target actor and twin target critics under "
            "no_grad, twin critics forward and backward with one fused Adam step, the actor "
            "through the critics (backward to the actor's weights only) with its Adam step, the "
            "temperature's loss and Adam step, one foreach polyak lerp"
        ),
    )


PLANNERS = {"PPO": plan_ppo, "DQN": plan_dqn, "SoftActorCritic": plan_sac}


def plan(work: str, frames: int) -> Plan:
    spec = COMPARISONS[work].slm_lab_spec(frames, 0)
    return PLANNERS[spec["agent"]["algorithm"]["name"]](spec, frames)


# -- the parts, each in a child process ------------------------------------------------------
def mlp(torch: Any, sizes: list[int], activation: str) -> Any:
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[activation]
    layers: list[Any] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(act())
    return torch.nn.Sequential(*layers)


class Step:
    """A gradient step with nothing around the arithmetic: gradients set to None, backward
    (to `inputs` only when given), the global gradient norm clipped with foreach calls, and
    torch's fused Adam kernel called on the moment tensors directly (no Optimizer object: its
    wrappers import torch._dynamo at the first call, seconds no run needs to pay): Adam's, or
    AdamW's with `optim` "AdamW"."""

    def __init__(
        self, torch: Any, params: list[Any], lr: float, clip: float | None, optim: str = "Adam"
    ) -> None:
        self.torch, self.params, self.lr, self.clip = torch, params, lr, clip
        # AdamW: torch's fused AdamW kernel, weight decay 0.01 (torch.optim.AdamW's default)
        self.adam, self.weight_decay = (
            (torch._fused_adamw_, 0.01) if optim == "AdamW" else (torch._fused_adam_, 0.0)
        )
        self.exp_avgs = [torch.zeros_like(w) for w in params]
        self.exp_avg_sqs = [torch.zeros_like(w) for w in params]
        self.steps = [torch.zeros(()) for _ in params]

    def __call__(self, loss: Any, inputs: list[Any] | None = None) -> None:
        torch = self.torch
        for w in self.params:
            w.grad = None
        torch.autograd.backward(loss, inputs=inputs)
        grads = [w.grad for w in self.params]
        if self.clip is not None:
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
            torch._foreach_mul_(grads, torch.clamp(self.clip / (norm + 1e-6), max=1.0))
        with torch.no_grad():
            torch._foreach_add_(self.steps, 1)
            self.adam(
                self.params,
                grads,
                self.exp_avgs,
                self.exp_avg_sqs,
                [],
                self.steps,
                amsgrad=False,
                lr=self.lr,
                beta1=0.9,
                beta2=0.999,
                weight_decay=self.weight_decay,
                eps=1e-8,
                maximize=False,
            )


def policy_value(torch: Any, p: Plan) -> tuple[Callable[[Any], tuple[Any, Any]], list[Any], Any]:
    """PPO's nets as the spec builds them: (forward(obs) -> (policy head, V), their parameters,
    fixed observations of the vector env). A conv net takes uint8 frames and, as SLM Lab's
    ConvNet, makes them float, channels_last and divided by 255 before its body."""
    out = p.act_dim if p.discrete else 2 * p.act_dim  # logits, or mean and log-std
    if not p.conv_layers:
        actor = mlp(torch, [p.obs_dim, *p.hid_layers, out], p.activation)
        critic = mlp(torch, [p.obs_dim, *p.hid_layers, 1], p.activation)
        params = [*actor.parameters(), *critic.parameters()]
        return (lambda x: (actor(x), critic(x))), params, torch.randn(p.num_envs, p.obs_dim)
    assert p.shared, "a conv net for PPO: shared policy and value heads only"
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[p.activation]
    layers: list[Any] = []
    channels = p.obs_shape[0]
    for out_channels, kernel, stride, padding, dilation in p.conv_layers:
        layers += [
            torch.nn.Conv2d(channels, out_channels, kernel, stride, padding, dilation),
            act(),
        ]
        channels = out_channels
    layers.append(torch.nn.Flatten())
    with torch.no_grad():
        width = torch.nn.Sequential(*layers)(torch.zeros(1, *p.obs_shape)).shape[1]
    for fc in p.hid_layers:
        layers += [torch.nn.Linear(width, fc), act()]
        width = fc
    body = torch.nn.Sequential(*layers).to(memory_format=torch.channels_last)
    policy, value = torch.nn.Linear(width, out), torch.nn.Linear(width, 1)

    def forward(x: Any) -> tuple[Any, Any]:
        h = body(x.float().contiguous(memory_format=torch.channels_last).div_(255.0))
        return policy(h), value(h)

    params = [*body.parameters(), *policy.parameters(), *value.parameters()]
    obs = torch.randint(256, (p.num_envs, *p.obs_shape), dtype=torch.uint8)
    return forward, params, obs


def arithmetic_ppo(torch: Any, p: Plan) -> dict[str, float]:
    forward, params, obs = policy_value(torch, p)
    step = Step(torch, params, 3e-4, p.clip_grad, p.optim)
    start = now()
    for _ in range(p.act_calls):
        with torch.inference_mode():
            head, _ = forward(obs)
            if p.discrete:
                torch.multinomial(torch.softmax(head, -1), 1)
            else:
                mean, log_std = head.chunk(2, -1)
                mean + log_std.exp() * torch.randn_like(mean)
    acting = since(start)
    rows = p.horizon * p.num_envs  # a training call's batch, stored as acting saw it
    batch_obs = obs[torch.randint(p.num_envs, (rows,))]
    actions = torch.randint(p.act_dim, (rows,)) if p.discrete else torch.randn(rows, p.act_dim)
    old_logp, advs, v_targets, old_v = (torch.randn(rows) for _ in range(4))
    rewards, values = torch.randn(p.horizon, p.num_envs), torch.randn(p.horizon + 1, p.num_envs)
    not_dones = torch.ones(p.horizon, p.num_envs)
    steps_per_call = p.train_steps // max(p.train_calls, 1)
    eps = p.clip_eps
    for _ in range(p.train_calls):
        with torch.no_grad():
            forward(obs)  # V(s_T)
            gae = torch.zeros(p.num_envs)
            for t in reversed(range(p.horizon)):
                delta = rewards[t] + p.gamma * values[t + 1] * not_dones[t] - values[t]
                gae = delta + p.gamma * 0.95 * not_dones[t] * gae
        minibatches: list[Any] = []
        for _ in range(steps_per_call):
            if not minibatches:  # an epoch: the batch shuffled into minibatches
                minibatches = list(torch.randperm(rows).split(p.batch))
            idx = minibatches.pop()
            head, v = forward(batch_obs.index_select(0, idx))
            v = v.squeeze(-1)
            if p.discrete:
                log_probs = torch.log_softmax(head, -1)
                logp = log_probs.gather(-1, actions[idx].unsqueeze(-1)).squeeze(-1)
                entropy = -(log_probs.exp() * log_probs).sum(-1)
            else:
                mean, log_std = head.chunk(2, -1)
                z = (actions[idx] - mean) / log_std.exp()
                logp = (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
                entropy = (log_std + 0.5 + 0.5 * math.log(2 * math.pi)).sum(-1)
            ratios = (logp - old_logp[idx]).exp()
            mb_advs = advs[idx]
            norm_advs = (mb_advs - mb_advs.mean()) / (mb_advs.std() + 1e-8)
            clipped = ratios.clamp(1 - eps, 1 + eps)
            policy_loss = -torch.min(ratios * norm_advs, clipped * norm_advs).mean()
            if p.clip_vloss:
                v_clipped = old_v[idx] + (v - old_v[idx]).clamp(-eps, eps)
                errors = (v - v_targets[idx]).square(), (v_clipped - v_targets[idx]).square()
                value_loss = 0.5 * torch.max(*errors).mean()
            else:
                value_loss = torch.nn.functional.mse_loss(v, v_targets[idx])
            step(policy_loss + 0.5 * value_loss - 0.01 * entropy.mean())
    return acting


def replay(torch: Any, p: Plan) -> dict[str, Any]:
    """Fixed replay arrays of the run's size, to gather minibatches from."""
    n = max(p.vector_steps, p.batch)
    actions = torch.randint(p.act_dim, (n,)) if p.discrete else torch.rand(n, p.act_dim) * 2 - 1
    return {
        "obs": torch.randn(n, p.obs_dim),
        "next_obs": torch.randn(n, p.obs_dim),
        "actions": actions,
        "rewards": torch.randn(n),
        "dones": torch.zeros(n),
    }


def arithmetic_dqn(torch: Any, p: Plan) -> dict[str, float]:
    net = mlp(torch, [p.obs_dim, *p.hid_layers, p.act_dim], p.activation)
    target = mlp(torch, [p.obs_dim, *p.hid_layers, p.act_dim], p.activation)
    step = Step(torch, list(net.parameters()), 1e-3, p.clip_grad)
    obs = torch.randn(p.num_envs, p.obs_dim)
    start = now()
    for _ in range(p.act_calls):
        with torch.inference_mode():
            net(obs).argmax(-1)
    acting = since(start)
    mem = replay(torch, p)
    n = len(mem["rewards"])
    steps_per_call = p.train_steps // max(p.train_calls, 1)
    for _ in range(p.train_calls):
        with torch.no_grad():
            torch._foreach_copy_(list(target.parameters()), list(net.parameters()))
        for _ in range(steps_per_call):
            idx = torch.randint(n, (p.batch,))
            s, s2, a, r, d = (
                mem[k][idx] for k in ("obs", "next_obs", "actions", "rewards", "dones")
            )
            with torch.no_grad():
                q_targets = r + p.gamma * (1 - d) * target(s2).max(-1).values
            q = net(s).gather(-1, a.unsqueeze(-1)).squeeze(-1)
            step(torch.nn.functional.smooth_l1_loss(q, q_targets))
    return acting


def squashed(torch: Any, actor: Any, obs: Any) -> tuple[Any, Any]:
    """A tanh-squashed Gaussian sample of the actor's policy and its log-probability."""
    mean, log_std = actor(obs).chunk(2, -1)
    std = log_std.clamp(-20, 2).exp()
    u = mean + std * torch.randn_like(mean)
    z = (u - mean) / std
    logp = (-0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    logp = logp - (2 * (math.log(2) - u - torch.nn.functional.softplus(-2 * u))).sum(-1)
    return torch.tanh(u), logp


def arithmetic_sac(torch: Any, p: Plan) -> dict[str, float]:
    actor = mlp(torch, [p.obs_dim, *p.hid_layers, 2 * p.act_dim], p.activation)
    critic_sizes = [p.obs_dim + p.act_dim, *p.hid_layers, 1]
    critics = [mlp(torch, critic_sizes, p.activation) for _ in range(2)]
    targets = [mlp(torch, critic_sizes, p.activation) for _ in range(2)]
    critic_params = [w for c in critics for w in c.parameters()]
    target_params = [w for c in targets for w in c.parameters()]
    actor_params = list(actor.parameters())
    log_alpha = torch.zeros(1, requires_grad=True)
    actor_step = Step(torch, actor_params, 1e-3, None)
    critic_step = Step(torch, critic_params, 1e-3, None)
    alpha_step = Step(torch, [log_alpha], 1e-3, None)
    target_entropy = -p.act_dim
    obs = torch.randn(p.num_envs, p.obs_dim)
    start = now()
    for _ in range(p.act_calls):
        with torch.inference_mode():
            squashed(torch, actor, obs)
    acting = since(start)
    mem = replay(torch, p)
    n = len(mem["rewards"])
    for _ in range(p.train_steps):
        idx = torch.randint(n, (p.batch,))
        s, s2, a, r, d = (mem[k][idx] for k in ("obs", "next_obs", "actions", "rewards", "dones"))
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            a2, logp2 = squashed(torch, actor, s2)
            sa2 = torch.cat([s2, a2], -1)
            q2 = torch.min(targets[0](sa2), targets[1](sa2)).squeeze(-1) - alpha * logp2
            q_targets = r + p.gamma * (1 - d) * q2
        sa = torch.cat([s, a], -1)
        critic_loss = sum(
            torch.nn.functional.mse_loss(c(sa).squeeze(-1), q_targets) for c in critics
        )
        critic_step(critic_loss)
        a_new, logp = squashed(torch, actor, s)
        sa_new = torch.cat([s, a_new], -1)
        q_new = torch.min(critics[0](sa_new), critics[1](sa_new)).squeeze(-1)
        actor_loss = (alpha * logp - q_new).mean()
        actor_step(actor_loss, inputs=actor_params)
        alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        alpha_step(alpha_loss)
        with torch.no_grad():
            torch._foreach_lerp_(target_params, critic_params, 0.005)
    return acting


# each runs the plan's torch calls and returns the seconds its acting forwards took
ARITHMETIC: dict[str, Callable[[Any, Plan], dict[str, float]]] = {
    "ppo": arithmetic_ppo,
    "dqn": arithmetic_dqn,
    "sac": arithmetic_sac,
}


def child_env(p: Plan) -> dict[str, float]:
    """Seconds to build and reset the vector env and step it for the plan's vector steps,
    actions drawn in advance (and, for an ALE game, the native env's threads: one per free
    core, as SLM Lab picks); `build_*`: the building and reset alone."""
    import numpy as np

    kwargs = dict(p.env_kwargs)
    if p.env_id.startswith(ALE_PREFIX):
        from slm_lab.env.vectorization import session_cpus

        kwargs["num_threads"] = max(1, min(p.num_envs, session_cpus(1)))
    rng = np.random.default_rng(0)
    if p.discrete:
        actions = rng.integers(p.act_dim, size=(p.vector_steps, p.num_envs))
    else:  # the bounds from a 1-env copy, off the clock
        probe = vector_env(p.env_id, 1)
        space = probe.single_action_space
        probe.close()
        shape = (p.vector_steps, p.num_envs, p.act_dim)
        actions = rng.uniform(space.low, space.high, size=shape).astype(space.dtype)
    start = now()
    vec = vector_env(p.env_id, p.num_envs, **kwargs)
    vec.reset(seed=0)
    build = since(start)
    for a in actions:
        vec.step(a)
    seconds = since(start)
    vec.close()
    seconds |= {f"build_{clock}": build[clock] for clock in CLOCKS}
    return seconds | ({"ale_threads": kwargs["num_threads"]} if "num_threads" in kwargs else {})


def child_arithmetic(p: Plan) -> dict[str, float]:
    """Seconds of the plan's torch calls on fixed tensors (and of its acting forwards alone),
    one thread, denormals flushed."""
    import torch

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    start = now()
    acting = ARITHMETIC[p.algo](torch, p)
    return since(start) | {f"acting_{clock}": acting[clock] for clock in CLOCKS}


# -- the profile's child: one SLM Lab session with timers around its parts -------------------
def timed(
    totals: dict[str, dict[str, float]], key: str, fn: Callable[..., Any]
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = now()
        try:
            return fn(*args, **kwargs)
        finally:
            for clock, seconds in since(start).items():
                totals[key][clock] += seconds

    return wrapper


def child_profile(work: str, frames: int, launched_at: float) -> dict[str, float]:
    """Seconds of one SLM Lab session's parts, in this process as a `train` session runs it."""
    import torch

    from slm_lab.experiment.layout import RunLayout
    from slm_lab.experiment.session import Session
    from slm_lab.experiment.task import SessionTask
    from slm_lab.lib import logger as log_setup
    from slm_lab.spec import spec_util

    imported_cpu, imported_wall = time.process_time(), monotonic()
    torch.set_num_threads(1)
    log_setup.setup("WARNING")
    spec = COMPARISONS[work].slm_lab_spec(frames, 0)
    config = spec_util.validate(spec, spec["name"]).with_values({"meta.num_threads": 1})
    keys = ("env", "acting", "update", "training", "recording", "checkpoints", "evaluation")
    extra = ("checkpoints_best", "analysis", "close", "build", "reset", "run")
    totals = {k: dict.fromkeys(CLOCKS, 0.0) for k in keys + extra}
    with tempfile.TemporaryDirectory(prefix="floor_profile_") as tmp:
        RunLayout(Path(tmp), config.name).make()
        start = now()
        session = Session(SessionTask(config, Path(tmp), trial=0, session=0))
        totals["build"] = since(start)
        agent, env, algorithm = session.agent, session.env, session.agent.algorithm
        env.step = timed(totals, "env", env.step)
        env.reset = timed(totals, "reset", env.reset)  # the first, in the loop: part of build
        agent.act = timed(totals, "acting", agent.act)
        agent.update = timed(totals, "update", agent.update)
        algorithm.train = timed(totals, "training", algorithm.train)
        session.add_row = timed(totals, "recording", session.add_row)
        session.save = timed(totals, "checkpoints", session.save)
        keep_best = session.checkpointer.keep_best
        session.checkpointer.keep_best = timed(totals, "checkpoints_best", keep_best)
        if session.evaluation is not None:
            session.evaluation.run = timed(totals, "evaluation", session.evaluation.run)
        session.finish = timed(totals, "analysis", session.finish)
        session.close = timed(totals, "close", session.close)
        start = now()
        session.run()
        totals["run"] = since(start)
    parts = {"startup": {"cpu": imported_cpu, "wall": imported_wall - launched_at}}
    parts["build"] = {c: totals["build"][c] + totals["reset"][c] for c in CLOCKS}
    for clock in CLOCKS:
        totals["update"][clock] -= totals["training"][clock]  # memory adds and schedules
        totals["recording"][clock] -= totals["checkpoints_best"][clock]  # add_row keeps the best
        totals["checkpoints"][clock] += totals["checkpoints_best"][clock]
    parts |= {k: totals[k] for k in keys}
    loop = {c: totals["run"][c] - totals["analysis"][c] - totals["close"][c] for c in CLOCKS}
    timed_in_loop = (*keys, "reset")
    parts["loop_other"] = {c: loop[c] - sum(totals[k][c] for k in timed_in_loop) for c in CLOCKS}
    parts["analysis"] = {c: totals["analysis"][c] + totals["close"][c] for c in CLOCKS}
    end = {"cpu": time.process_time(), "wall": monotonic() - launched_at}
    return {"parts": parts, "end": end, "frames": frames}


# -- the parent ------------------------------------------------------------------------------
def child_cmd(command: str, work: str, frames: int, *extra: str) -> list[str | Path]:
    return [PYTHON, THIS, command, work, "--frames", str(frames), *extra]


def seconds(proc: Any) -> dict[str, float]:
    """A finished process's CPU seconds (its own and its waited-for children's) and wall."""
    return {"cpu": proc.cpu_s, "wall": proc.wall_s}


def run_child(command: str, work: str, frames: int, *extra: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="floor_") as tmp:
        proc = run_process(child_cmd(command, work, frames, *extra), cwd=Path(tmp))
    return json.loads(line_after(proc.stdout, "result:")) | {"process": seconds(proc)}


def startup_s(p: Plan) -> dict[str, float]:
    imports = "import os, torch, gymnasium" + (", mujoco" if p.env_id in MUJOCO_ENVS else "")
    imports += ", ale_py" if p.env_id.startswith(ALE_PREFIX) else ""
    imports += "; os._exit(0)"  # no teardown: see the module docstring
    with tempfile.TemporaryDirectory(prefix="floor_startup_") as tmp:
        return seconds(run_process([PYTHON, "-c", imports], cwd=Path(tmp)))


def slm_lab_s(work: str, frames: int, seed: int) -> dict[str, float]:
    spec = COMPARISONS[work].slm_lab_spec(frames, seed)
    spec["meta"] |= {"max_session": 1, "random_seed": seed}
    with tempfile.TemporaryDirectory(prefix="floor_slm_lab_") as tmp:
        spec_path, name = write_spec_file(spec, Path(tmp))
        return seconds(run_process(slm_lab_run_cmd(spec_path, name, "train"), cwd=Path(tmp)))


def sb3_s(work: str, frames: int, seed: int) -> dict[str, float]:
    cmd: list[str | Path] = [PYTHON, ROOT / "bench" / "vs_sb3.py", "sb3", work]
    cmd += ["--frames", str(frames), "--seed", str(seed)]
    with tempfile.TemporaryDirectory(prefix="floor_sb3_") as tmp:
        return seconds(run_process(cmd, cwd=Path(tmp)))


def floor_parts(work: str, p: Plan, frames: int) -> dict[str, dict[str, float]]:
    """Each part's CPU and wall seconds, their sum, the acting forwards' share of the
    arithmetic and the building's (and first reset's) of the env."""
    parts = {"startup": startup_s(p), "env": run_child("child-env", work, frames)}
    arithmetic = run_child("child-arithmetic", work, frames)
    parts["arithmetic"] = {c: arithmetic[c] for c in CLOCKS}
    parts["sum"] = {c: sum(parts[k][c] for k in PARTS) for c in CLOCKS}
    parts["of_which_acting"] = {c: arithmetic[f"acting_{c}"] for c in CLOCKS}
    parts["of_which_env_build"] = {c: parts["env"][f"build_{c}"] for c in CLOCKS}
    return parts


def both(x: dict[str, float]) -> str:
    return f"{x['cpu']:.2f} cpu / {x['wall']:.2f} wall s"


def ale_threads(parts: dict[str, Any]) -> str:
    """The ALE threads the floor's env stepped with, for its line (nothing for other envs)."""
    threads = parts["env"].get("ale_threads")
    return "" if threads is None else f" | ALE threads {threads}"


def frames_of(work: str, scale: float) -> int:
    return max(1, round(COMPARISONS[work].default_frames * scale))


app = typer.Typer(
    help="Each work against its floor (start-up + env + arithmetic) and SLM Lab's and SB3's whole processes.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


FloorWork = StrEnum("FloorWork", {name: name for name in WORK_NAMES})
Work = Annotated[FloorWork, typer.Argument(help="a bench/vs_sb3.py record")]
Scale = Annotated[float, typer.Option(min=0, help="times the work's default frames")]


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


@app.command("plan")
def show_plan(work: Work, frames_scale: Scale = 1.0) -> None:
    """The floor's shapes and counts for WORK, and how they follow from its spec."""
    p = plan(work, frames_of(work, frames_scale))
    for key, value in asdict(p).items():
        typer.echo(f"{key}: {value}")


@app.command()
def run(
    work: Work,
    frames_scale: Scale = 1.0,
    rounds: Annotated[int, typer.Option(min=1, help="A/B/C rounds")] = 2,
    seed: Annotated[int, typer.Option(help="seed of SLM Lab and SB3; round i uses seed + i")] = 0,
) -> None:
    """The floor's parts and sum, SLM Lab's and SB3's whole processes, interleaved."""
    require_bytecode(*TIMED_MODULES, "stable_baselines3")
    frames = frames_of(work, frames_scale)
    p = plan(work, frames)
    typer.echo(f"{work}: {frames} frames | {p.derivation} | {load()}")
    sides = ("floor", "slm_lab", "sb3")
    runs: list[dict[str, Any]] = []
    for i in range(rounds):
        for side in sides[i % 3 :] + sides[: i % 3]:
            at = load()
            if side == "floor":
                r = floor_parts(work, p, frames)
                line = " | ".join(f"{k} {both(v)}" for k, v in r.items()) + ale_threads(r)
            else:
                fn = slm_lab_s if side == "slm_lab" else sb3_s
                r = {"whole": fn(work, frames, seed + i)}
                line = f"whole process {both(r['whole'])}"
            runs.append({"side": side, "round": i, "load_at_launch": at, **r})
            typer.echo(f"[round {i + 1} {side:<7}] {line} | {at}")
    summary: dict[str, Any] = {}
    for clock in CLOCKS:

        def med(side: str, key: str, clock: str = clock) -> float:
            return statistics.median(r[key][clock] for r in runs if r["side"] == side)

        parts = {k: med("floor", k) for k in PARTS}
        floor = sum(parts.values())
        whole = {s: med(s, "whole") for s in sides[1:]}
        env_build = med("floor", "of_which_env_build")
        summary[clock] = {"parts": parts, "floor": floor, "whole": whole, "env_build": env_build}
        typer.echo(
            f"== {work}, {frames} frames, {clock} seconds, medians of {rounds}: "
            + " + ".join(
                f"{k} {v:.2f}" + (f" (of which build {env_build:.2f})" if k == "env" else "")
                for k, v in parts.items()
            )
            + f" = floor {floor:.2f} | slm_lab {whole['slm_lab']:.2f} "
            f"({whole['slm_lab'] / floor:.2f}x floor) | sb3 {whole['sb3']:.2f} "
            f"({whole['sb3'] / floor:.2f}x floor)"
        )
    typer.echo(load())
    write_report(
        OUT_DIR / f"floor_{work}.json",
        {"work": work, "frames": frames, "plan": asdict(p), "runs": runs, "summary": summary},
    )


@app.command()
def profile(work: Work, frames_scale: Scale = 1.0) -> None:
    """Where one SLM Lab session's seconds go, beside the floor's parts and the whole process."""
    require_bytecode(*TIMED_MODULES)
    frames = frames_of(work, frames_scale)
    p = plan(work, frames)
    at = load()
    floor = floor_parts(work, p, frames)
    whole = slm_lab_s(work, frames, 0)
    prof = run_child("child-profile", work, frames, "--launched-at", str(monotonic()))
    parts = prof["parts"]
    parts["exit"] = {c: prof["process"][c] - prof["end"][c] for c in CLOCKS}
    build = floor["of_which_env_build"]  # the env built and reset: beside the session's build
    beside = {"startup": floor["startup"], "build": build, "acting": floor["of_which_acting"]}
    beside["env"] = {c: floor["env"][c] - build[c] for c in CLOCKS}
    beside["training"] = {c: floor["arithmetic"][c] - floor["of_which_acting"][c] for c in CLOCKS}
    typer.echo(f"{work}, {frames} frames | {at} at the start, {load()} at the end")
    typer.echo(" | ".join(f"floor {k} {both(v)}" for k, v in floor.items()) + ale_threads(floor))
    typer.echo("one SLM Lab session in one process: part, cpu s (floor's), wall s (floor's)")
    for name, value in [*parts.items(), ("whole child", prof["process"]), ("slm-lab run", whole)]:
        row = f"  {name:<12}"
        for clock in CLOCKS:
            floor_part = f"({beside[name][clock]:.2f})" if name in beside else ""
            row += f" {value[clock]:8.2f} {floor_part:>8}"
        typer.echo(row)
    write_report(
        OUT_DIR / f"floor_profile_{work}.json",
        {"work": work, "frames": frames, "floor_parts": floor, "slm_lab_whole": whole}
        | {"profile": prof, "load_start": at, "load_end": load()},
    )


Frames = Annotated[int, typer.Option()]


@app.command("child-env", hidden=True)
def child_env_command(work: str, frames: Frames) -> None:
    typer.echo(f"result: {json.dumps(child_env(plan(work, frames)))}")


@app.command("child-arithmetic", hidden=True)
def child_arithmetic_command(work: str, frames: Frames) -> None:
    typer.echo(f"result: {json.dumps(child_arithmetic(plan(work, frames)))}")


@app.command("child-profile", hidden=True)
def child_profile_command(
    work: str, frames: Frames, launched_at: Annotated[float, typer.Option()]
) -> None:
    typer.echo(f"result: {json.dumps(child_profile(work, frames, launched_at))}")
    from slm_lab.cli.main import exit_now

    exit_now(0)  # the session's process ends as `slm-lab`'s does: the profile's "exit" row


if __name__ == "__main__":
    app()
