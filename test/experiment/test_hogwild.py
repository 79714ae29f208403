"""Hogwild: the workers' nets and optimizers are really the global ones (shared), or really
push their gradients into the global nets and pull the weights back (synced)."""

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import load, make_spec

from slm_lab.agent.algorithm.base import Algorithm
from slm_lab.env.clock import Clock
from slm_lab.experiment import hogwild
from slm_lab.experiment.build import build
from slm_lab.experiment.task import SessionTask, SharedNets

STEPS = 50  # gradient steps per worker


def a3c_spec(optim: str = "GlobalAdam", mode: str = "shared") -> dict[str, Any]:
    spec = make_spec("a2c_gae", max_session=2)
    spec["meta"]["distributed"] = mode
    for role in ("actor", "critic"):
        spec["agent"]["net"][f"{role}_optim_spec"] = {"name": optim, "lr": 0.01}
    return spec


def make_algorithm(spec: dict[str, Any], seed: int) -> Algorithm:
    typed = load(spec)
    env, agent = build(
        SessionTask.detached(typed, seed), Clock(typed.env.max_frame, typed.env.num_envs)
    )
    env.close()
    return agent.algorithm


def global_state(directory: Path) -> dict[str, torch.Tensor]:
    """The global nets' parameters and every optimizer's step counts, read from the files by a
    fresh algorithm attached to them."""
    algorithm = make_algorithm(a3c_spec(), seed=99)
    hogwild.attach(algorithm, SharedNets(str(directory), "shared", 2))
    state = {f"net.{k}": v.clone() for k, v in algorithm.nets.state_dict().items()}
    steps = [
        o.state[p]["step"].item()
        for o in algorithm.optims
        for g in o.param_groups
        for p in g["params"]
    ]
    state["steps"] = torch.tensor(steps)
    return state


def loss_of(algorithm: Algorithm) -> torch.Tensor:
    obs = torch.randn(8, *algorithm.obs_shape)
    mean, _, v = algorithm.nets.pdparam_value(obs)
    return mean.square().mean() + v.square().mean()


def worker(spec: dict[str, Any], directory: str, mode: str, seed: int) -> None:
    """A worker process: its own algorithm, attached to the global nets, STEPS gradient steps."""
    torch.set_num_threads(1)
    algorithm = make_algorithm(spec, seed)
    hogwild.attach(algorithm, SharedNets(directory, mode, 2))
    for _ in range(STEPS):
        assert algorithm.optimize(loss_of(algorithm))


@pytest.mark.parametrize("optim", ["GlobalAdam", "GlobalRMSprop"])
def test_shared_workers_step_the_global_nets_and_optimizer(tmp_path: Path, optim: str) -> None:
    """Two worker processes of STEPS steps each: every parameter's global step count went past
    STEPS (both workers' steps reached the one shared count; an increment can be lost when the
    two step at once, as the weights' updates can, without a lock), and the parent sees the
    weights they made."""
    spec = a3c_spec(optim)
    hogwild.create(make_algorithm(spec, seed=0), tmp_path)
    before = global_state(tmp_path)
    assert (before["steps"] == 0).all()
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=worker, args=(spec, str(tmp_path), "shared", seed)) for seed in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0, 0]
    after = global_state(tmp_path)
    assert ((after["steps"] > STEPS) & (after["steps"] <= 2 * STEPS)).all()
    changed = [k for k in before if k.startswith("net.") and not torch.equal(before[k], after[k])]
    assert changed == [k for k in before if k.startswith("net.")]


def test_shared_worker_params_are_the_global_tensors(tmp_path: Path) -> None:
    """In one process: a step of one worker is seen by another without any copy."""
    spec = a3c_spec()
    hogwild.create(make_algorithm(spec, seed=0), tmp_path)
    a, b = make_algorithm(spec, seed=1), make_algorithm(spec, seed=2)
    for algorithm in (a, b):
        hogwild.attach(algorithm, SharedNets(str(tmp_path), "shared", 2))
    assert a.optimize(loss_of(a))
    for pa, pb in zip(a.nets.parameters(), b.nets.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert all(o.state[p]["step"].item() == 1 for o in b.optims for p in o.state)


def test_synced_worker_pushes_its_gradient_and_pulls_the_global_weights(tmp_path: Path) -> None:
    """synced: a worker's step moves the global weights by its own gradient (as a plain
    optimizer on those weights would), its local copy equals the global weights after the step,
    and another worker's copy stays its own until it pulls."""
    spec = a3c_spec(mode="synced")
    hogwild.create(make_algorithm(spec, seed=0), tmp_path)
    initial = global_state(tmp_path)
    a, b = make_algorithm(spec, seed=1), make_algorithm(spec, seed=2)
    workers = [hogwild.attach(x, SharedNets(str(tmp_path), "synced", 2)) for x in (a, b)]
    assert all(t.data_ptr() != g.data_ptr() for t, g in workers[0].pairs)  # its own copy
    # the same step by a plain optimizer on a copy of the global nets, for the expected weights
    reference = make_algorithm(a3c_spec(), seed=3)
    reference.nets.load_state_dict(a.nets.state_dict())
    torch.manual_seed(7)
    loss = loss_of(a)
    torch.manual_seed(7)
    assert reference.optimize(loss_of(reference))
    assert a.optimize(loss)
    after = global_state(tmp_path)
    assert (after["steps"] == 1).all()
    for k, v in reference.nets.state_dict().items():
        torch.testing.assert_close(after[f"net.{k}"], v)  # the worker's gradient reached them
        assert not torch.equal(after[f"net.{k}"], initial[f"net.{k}"]) or "log_std" in k
    for k, v in a.nets.state_dict().items():  # pulled
        assert torch.equal(v, after[f"net.{k}"])
    b_before = {k: v.clone() for k, v in b.nets.state_dict().items()}
    assert all(torch.equal(b_before[k], initial[f"net.{k}"]) for k in b_before)
    workers[1].pull()
    for k, v in b.nets.state_dict().items():
        assert torch.equal(v, after[f"net.{k}"])
