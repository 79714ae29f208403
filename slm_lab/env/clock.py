"""The run clock: t (vector steps), frame (env steps over all envs), epi, opt_step, wall_t.

The session makes it and passes it to the backend (which ticks it each vector step) and to
the agent (whose schedules read it); `max_frame` is the run's length, read from here.
"""

import time


class Clock:
    def __init__(self, max_frame: int, num_envs: int) -> None:
        self.max_frame = max_frame
        self.num_envs = num_envs
        self.reset()

    def reset(self) -> None:
        self.t = 0
        self.frame = 0
        self.epi = 0
        self.opt_step = 0
        self._wall_offset = 0.0
        self._start = time.perf_counter()

    def done(self) -> bool:
        """Whether the run has reached max_frame."""
        return self.frame >= self.max_frame

    def tick(self, num_done: int) -> None:
        self.t += 1
        self.frame += self.num_envs
        self.epi += num_done

    @property
    def global_frame(self) -> int:
        """The frames of the trial's global count: a Hogwild trial's workers count together
        (experiment/hogwild.py); a session alone counts its own."""
        return self.frame

    @property
    def global_max_frame(self) -> int:
        return self.max_frame

    @property
    def wall_t(self) -> float:
        return self._wall_offset + time.perf_counter() - self._start

    def state_dict(self) -> dict[str, float]:
        return {
            "t": self.t,
            "frame": self.frame,
            "epi": self.epi,
            "opt_step": self.opt_step,
            "wall_t": self.wall_t,
        }

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.t, self.frame, self.epi, self.opt_step = (
            int(state[k]) for k in ("t", "frame", "epi", "opt_step")
        )
        self._wall_offset = float(state["wall_t"])
        self._start = time.perf_counter()
