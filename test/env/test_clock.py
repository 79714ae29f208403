from slm_lab.env.clock import Clock


def test_a_clock_taken_up_from_a_state_keeps_where_it_was_taken_up() -> None:
    clock = Clock(1000, 4)
    assert clock.origin == (0.0, 0.0)
    for _ in range(25):
        clock.tick(0)
    state = {**clock.state_dict(), "wall_t": 600.0}  # saved after 10 minutes
    resumed = Clock(1000, 4)
    resumed.load_state_dict(state)
    assert resumed.origin == (100.0, 600.0)
    assert resumed.frame == 100 and resumed.wall_t >= 600.0
    resumed.reset()
    assert resumed.origin == (0.0, 0.0)
