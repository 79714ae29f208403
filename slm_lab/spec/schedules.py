"""Warnings about a run's length: frame-based schedules that do not fit its max_frame, and a
run (or a search's trial) that ends before its first update."""

import math

from slm_lab.agent.algorithm.config import OffPolicyConfig, PPOConfig
from slm_lab.lib.config import SpecError
from slm_lab.lib.schedule import VarScheduler
from slm_lab.spec.schema import Spec

EXPLORING_POLICIES = ("epsilon_greedy", "boltzmann")  # the action policies explore_var drives

FRAC_HINT = "give end_frac (a fraction of max_frame) instead to follow the run"  # schedule warnings


def schedule_warnings(spec: Spec) -> list[str]:
    """The frame-based schedules written in absolute frames that do not fit this run's
    max_frame: an LR, entropy or clip schedule that ends before or after it, an exploration or
    PER beta schedule that never reaches its end. A schedule given as a fraction of the run
    (`end_frac`, an LR scheduler without `frame`, PER's `beta_end_step: null`) always fits."""
    max_frame = spec.env.max_frame
    found = []
    for key, net in (("net", spec.agent.net), ("critic_net", spec.agent.critic_net)):
        if net is None:
            continue
        for role, config in (("", net.base), ("actor_", net.actor), ("critic_", net.critic)):
            sched = config.lr_scheduler_spec
            if sched is None or sched.frame is None or sched.frame == max_frame:
                continue
            if role and sched == net.base.lr_scheduler_spec:
                continue  # the shared schedule, named once
            path = f"agent.{key}.{role}lr_scheduler_spec.frame"
            found.append(
                f"{path}: the lr stops falling at frame {sched.frame}, before env.max_frame {max_frame}: the rest of the run trains at its floor; drop frame to follow max_frame"
                if sched.frame < max_frame
                else f"{path}: the lr falls until frame {sched.frame}, after env.max_frame {max_frame}: the run ends before it reaches its floor; drop frame to follow max_frame"
            )
    algo = spec.agent.algorithm
    for name, spans_run in (
        ("explore_var_spec", False),
        ("entropy_coef_spec", True),
        ("clip_eps_spec", True),
    ):
        sched = getattr(algo, name, None)
        if sched is None or sched.name == "no_decay":
            continue
        if name == "explore_var_spec" and algo.action_policy not in EXPLORING_POLICIES:
            continue
        end = sched.end_frame(max_frame)
        if end <= sched.start_step:
            found.append(
                f"agent.algorithm.{name}: it ends at frame {end} (of env.max_frame {max_frame}), not after its start_step {sched.start_step}: it jumps from {sched.start_val} to {sched.end_val} there"
            )
        elif sched.end_frac is not None:
            continue  # follows the run
        elif end > max_frame:
            value = VarScheduler(sched, max_frame).update(max_frame)
            found.append(
                f"agent.algorithm.{name}.end_step: {end} is after env.max_frame {max_frame}: the run ends at {value:.4g}, not {sched.end_val}; {FRAC_HINT}"
            )
        elif spans_run and end < max_frame:
            found.append(
                f"agent.algorithm.{name}.end_step: {end} is before env.max_frame {max_frame}: it holds {sched.end_val} for the rest of the run; {FRAC_HINT}"
            )
    memory = spec.agent.memory
    beta_end = getattr(memory, "beta_end_step", None)
    if beta_end is not None and beta_end > max_frame:
        found.append(
            f"agent.memory.beta_end_step: {beta_end} is after env.max_frame {max_frame}: beta never reaches 1; set it null to follow max_frame"
        )
    return found


def first_update(spec: Spec) -> tuple[int, str, str] | None:
    """(frame, what sets it, the key that moves it) of the run's first training call; None
    where the spec cannot say: an algorithm that never trains, or a batch of whole episodes
    (OnPolicyReplay), whose length the run decides."""
    algo, memory, num_envs = spec.agent.algorithm, spec.agent.memory, spec.env.num_envs
    if memory is None or memory.name == "OnPolicyReplay":
        return None
    if isinstance(algo, OffPolicyConfig):  # trains once past training_start_step with a batch
        start, batch = algo.training_start_step, memory.batch_size
        need, made_of, key = (
            (start, f"training_start_step {start}", "training_start_step")
            if start >= batch
            else (batch, f"agent.memory.batch_size {batch}", "agent.memory.batch_size")
        )
        frame = math.ceil(need / num_envs) * num_envs  # the replay fills num_envs a step
        steps = f" in steps of num_envs {num_envs}" if frame != need else ""
        return frame, made_of + steps, key
    if isinstance(algo, PPOConfig):
        unrolls = f" x num_unrolls {algo.num_unrolls}" if algo.num_unrolls > 1 else ""
        steps, made_of, key = (
            algo.time_horizon * algo.num_unrolls,
            f"time_horizon {algo.time_horizon}{unrolls}",
            "time_horizon",
        )
    else:  # an on-policy batch of training_frequency vector steps
        steps = algo.training_frequency
        made_of, key = f"training_frequency {steps}", "training_frequency"
    return steps * num_envs, f"{made_of} x num_envs {num_envs}", key


def update_warning(spec: Spec) -> str | None:
    """One line when the run reaches max_frame before its first training call: it would log
    every row with opt_step 0 and end as if it had trained."""
    first = first_update(spec)
    if first is None:
        return None
    frame, made_of, key = first
    max_frame, num_envs = spec.env.max_frame, spec.env.num_envs
    if math.ceil(max_frame / num_envs) * num_envs >= frame:  # the last vector step's frame
        return None
    return f"env.max_frame: {max_frame} ends before the first update at frame {frame} ({made_of}): the run never trains; raise max_frame or lower {key}"


def update_warnings(spec: Spec) -> list[str]:
    """`update_warning` of the run; for a search whose own values train, of a trial at each
    value a searched path can take (its bounds, each choice) that would not."""
    line = update_warning(spec)
    if line is not None:
        return [line]
    found = []
    for param in spec.search or ():
        for value in param.probes():
            try:
                trial = spec.trial({param.path: value})
            except SpecError:
                continue  # validation names what is wrong with the value
            line = update_warning(trial)
            if line is not None:
                found.append(f"{param.key}: a trial at {value!r} never trains: {line}")
                break
    return found


def warn_schedules(spec: Spec) -> None:
    """One warning per schedule that does not fit the run's max_frame, and one when the run
    (or a search's trial) ends before its first update."""
    from loguru import logger

    for line in schedule_warnings(spec) + update_warnings(spec):
        logger.warning(line)
