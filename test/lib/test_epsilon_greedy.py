"""Epsilon-greedy action selection: its draws, and the Q-net run only for greedy actions."""

import pytest
import torch

from slm_lab.lib import distribution as D

CPU = torch.device("cpu")


def reference(scores: torch.Tensor, explore_var: float) -> torch.Tensor:
    """The rule written out: argmax, then a uniform action and a uniform coin per row from the
    global generator, the uniform action where the coin is below explore_var."""
    greedy = scores.argmax(-1)
    random = torch.randint_like(greedy, scores.shape[-1])
    return torch.where(torch.rand(greedy.shape) < explore_var, random, greedy)


@pytest.mark.parametrize("explore_var", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize(("rows", "n_actions"), [(1, 2), (4, 3), (16, 18)])
def test_the_actions_and_the_generator_after_them_are_the_rules(
    explore_var: float, rows: int, n_actions: int
) -> None:
    """Same actions as the rule under the same seed, and the global generator left where the
    rule leaves it (a run's later draws are unchanged), over 50 seeds each."""
    for seed in range(50):
        scores = torch.randn(rows, n_actions)
        torch.manual_seed(seed)
        expected, after = reference(scores, explore_var), torch.rand(4)
        for lazy in (False, True):
            torch.manual_seed(seed)
            actions = (
                D.epsilon_greedy(lambda s=scores: s, (rows,), n_actions, explore_var, CPU)
                if lazy
                else D.select_discrete(scores, "epsilon_greedy", explore_var)
            )
            assert actions.dtype == torch.int64
            assert torch.equal(actions, expected)
            assert torch.equal(torch.rand(4), after)


def test_the_q_values_run_only_when_some_row_acts_greedily() -> None:
    calls = []

    def q_values() -> torch.Tensor:
        calls.append(1)
        return torch.tensor([[0.0, 1.0, 0.0]] * 8)

    for _ in range(20):
        D.epsilon_greedy(q_values, (8,), 3, 1.0, CPU)
    assert calls == []
    actions = D.epsilon_greedy(q_values, (8,), 3, 0.0, CPU)
    assert calls == [1]
    assert actions.tolist() == [1] * 8
