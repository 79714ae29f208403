"""Frames for a video, headless: an env made with Gymnasium's `render_mode="rgb_array"` and
wrapped in `FrameRecorder`, which keeps the frame after each reset and each step.

Without a display (`headless`): pygame's envs (classic control, Box2D) draw on SDL's dummy
video driver, which needs no display; MuJoCo renders offscreen through the OpenGL backend that
`MUJOCO_GL` names, and Gymnasium tries GLFW first, which needs a display, so unless `MUJOCO_GL`
is set, `choose_mujoco_gl` sets the first of EGL and OSMesa that can make a context here, tried
in a fresh process (a backend is fixed once loaded). `mujoco.Renderer` (MuJoCo Playground's
frames) takes its GL context class from `MUJOCO_GL` as it was when MuJoCo was imported:
`mujoco_renderer_headless` chooses the backend and aligns that class with it.
"""

import importlib
import os
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from slm_lab.lib.config import SpecError

RENDER_MODE = "rgb_array"
DEFAULT_FPS = 30.0  # an env's metadata without render_fps
DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY")
MUJOCO_GL_BACKENDS = ("egl", "osmesa")  # headless OpenGL backends, in the order tried
GL_PROBE = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free()"
GL_PROBE_TIMEOUT_S = 60
MUJOCO_GL_CONTEXT = "mujoco.rendering.classic.gl_context"  # mujoco.Renderer's GL context class


class FrameRecorder(gym.Wrapper):
    """Renders after every reset and step and keeps the frames until `pop`: an episode of T
    steps gives T + 1 frames. `fps`: frames per second of real time that `pop`'s frames show,
    from `steps_per_frame` (the env's own steps in one step of this wrapper: frame skip,
    action repeat) and the env's own rate (`env_fps`, default its metadata's render_fps)."""

    def __init__(
        self, env: gym.Env, steps_per_frame: int = 1, env_fps: float | None = None
    ) -> None:
        super().__init__(env)
        env_fps = env_fps or env.metadata.get("render_fps") or DEFAULT_FPS
        self.fps = float(env_fps) / steps_per_frame
        self.frames: list[np.ndarray] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        out = self.env.reset(**kwargs)
        self.frames.append(self.render())
        return out

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        out = self.env.step(action)
        self.frames.append(self.render())
        return out

    def pop(self) -> list[np.ndarray]:
        frames, self.frames = self.frames, []
        return frames


def check_renders(env_id: str) -> None:
    """SpecError when the Gymnasium env `env_id` has no rgb_array render mode (as its class
    declares them), before it is made: it could not give frames for a video."""
    entry = gym.spec(env_id).entry_point
    creator = entry if callable(entry) else load_env_creator(entry)
    modes = getattr(creator, "metadata", {}).get("render_modes") or []
    if RENDER_MODE not in modes:
        raise SpecError(
            f"--record: {env_id} cannot render frames (its render modes: {', '.join(modes) or 'none'}; a video needs {RENDER_MODE})"
        )


def headless() -> None:
    """Without a display, what renders frames renders them offscreen: before an env made with
    rgb_array renders its first frame (SDL_VIDEODRIVER, MUJOCO_GL, unless they are set)."""
    if any(map(os.environ.get, DISPLAY_VARS)):
        return
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if "mujoco" in sys.modules:  # the env loaded it: it may render with it
        choose_mujoco_gl()


def mujoco_renderer_headless() -> None:
    """Without a display, before the first `mujoco.Renderer` is made: MUJOCO_GL chosen
    (`choose_mujoco_gl`), and MuJoCo's GL context class the one it names. MuJoCo fixes that
    class when it is imported (GLFW's when MUJOCO_GL was not set); imported before MUJOCO_GL
    was set, its gl_context module is loaded again (no context of the old class was made: GLFW
    has none without a display)."""
    if any(map(os.environ.get, DISPLAY_VARS)):
        return
    choose_mujoco_gl()
    gl_context = sys.modules.get(MUJOCO_GL_CONTEXT)
    wanted = os.environ["MUJOCO_GL"].lower().strip()
    if gl_context is not None and getattr(gl_context, "_MUJOCO_GL", wanted) != wanted:
        importlib.reload(gl_context)


def choose_mujoco_gl() -> None:
    """Unless MUJOCO_GL is set, set it to the first headless backend that works here;
    SpecError when none does."""
    if "MUJOCO_GL" in os.environ:
        return
    for backend in MUJOCO_GL_BACKENDS:
        probe = subprocess.run(
            [sys.executable, "-c", GL_PROBE],
            env={**os.environ, "MUJOCO_GL": backend},
            capture_output=True,
            timeout=GL_PROBE_TIMEOUT_S,
        )
        if probe.returncode == 0:
            os.environ["MUJOCO_GL"] = backend
            return
    raise SpecError(
        f"--record: MuJoCo cannot render without a display here: none of {', '.join(MUJOCO_GL_BACKENDS)} works (install EGL or OSMesa, set MUJOCO_GL, or run under xvfb-run)"
    )
