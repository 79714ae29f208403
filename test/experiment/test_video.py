"""`enjoy@<run> --record`: a video of the replayed episodes in the enjoy folder, headless, read
back with imageio: one frame at each episode's reset and one after each step (T + 1 for an
episode of T steps). CartPole, Atari, MuJoCo and MuJoCo Playground; the GIF fallback; the one-line refusals; and
nothing half-written when a replay fails."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import imageio.v3 as iio
import numpy as np
import pytest
from conftest import invoke, make_spec, run_dirs, write_spec_file
from PIL import Image, ImageSequence

from slm_lab.env import atari_backend, render
from slm_lab.env.config import EnvConfig
from slm_lab.experiment import control
from slm_lab.lib.config import SpecError, parse

NAME = "ppo_video"
SLM_LAB = str(Path(sys.executable).parent / "slm-lab")
CARTPOLE_FRAME = (400, 600, 3)
CARTPOLE_FPS = 50.0  # CartPole's render_fps, one frame per step
ATARI_FRAME = (210, 160, 3)


def new_dir(data: Path, before: set[Path]) -> Path:
    [path] = set(run_dirs(data)) - before
    return path


def train(workdir: Path, name: str, spec: dict[str, Any]) -> tuple[Path, Path]:
    """A dev run of `spec` in `workdir`: (spec file, run folder)."""
    spec_file = write_spec_file(workdir / f"{name}.json", {name: spec})
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", str(spec_file), name, "dev"])
        assert result.exit_code == 0, result.stderr[-3000:]
        return spec_file, workdir / new_dir(Path("data"), before)


def enjoy(workdir: Path, *args: str) -> tuple[Any, Path | None]:
    """`slm-lab run ... --record` in `workdir`: the result and the new enjoy folder (None)."""
    with contextlib.chdir(workdir):
        before = set(run_dirs(Path("data")))
        result = invoke(["run", *args])
        after = set(run_dirs(Path("data"))) - before
    return result, workdir / after.pop() if after else None


def read_video(path: Path) -> tuple[list[np.ndarray], float]:
    """The frames of an MP4 and its frames per second."""
    reader = imageio.get_reader(path)
    fps = reader.get_meta_data()["fps"]
    frames = list(reader.iter_data())
    reader.close()
    return frames, fps


@pytest.fixture(scope="module")
def video_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny trained PPO CartPole run (500 frames): (spec file, run folder)."""
    workdir = tmp_path_factory.mktemp("video")
    return train(workdir, NAME, make_spec("ppo", max_frame=500, random_seed=11))


@pytest.mark.cli
@pytest.mark.parametrize("episodes", [1, 3])
def test_enjoy_record_writes_a_video_of_the_episodes(
    episodes: int, video_run: tuple[Path, Path]
) -> None:
    spec_file, run_dir = video_run
    target = f"enjoy@{run_dir}" if episodes == 1 else "enjoy@latest"
    result, out = enjoy(
        run_dir.parent.parent, str(spec_file), NAME, target, "--record", "--episodes", str(episodes)
    )
    assert result.exit_code == 0, result.stderr[-3000:]
    assert out.name.startswith(f"{run_dir.name}_enjoy_")
    assert sorted(os.listdir(out)) == ["enjoy.mp4", "enjoy_metrics.json"]
    metrics = json.loads((out / "enjoy_metrics.json").read_text())
    assert metrics["episodes"] == len(metrics["lengths"]) == episodes
    assert metrics["returns"] == metrics["lengths"]  # CartPole pays 1 a step
    frames, fps = read_video(out / "enjoy.mp4")
    assert len(frames) == metrics["video_frames"] == sum(metrics["lengths"]) + episodes
    assert fps == CARTPOLE_FPS
    assert all(f.shape == CARTPOLE_FRAME for f in frames)
    assert not np.array_equal(frames[0], frames[-1])  # the pole moved
    assert result.stdout.splitlines()[-1] == f"video: {metrics['video']} ({len(frames)} frames)"
    assert Path(metrics["video"]).name == "enjoy.mp4"
    assert not list((run_dir.parent).glob(".*"))  # no temporary file left beside the folders


@pytest.mark.cli
def test_enjoy_record_without_ffmpeg_writes_a_gif(
    video_run: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import imageio_ffmpeg

    def no_ffmpeg() -> str:
        raise RuntimeError("no ffmpeg exe could be found")

    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", no_ffmpeg)
    _, run_dir = video_run
    result, out = enjoy(run_dir.parent.parent, f"enjoy@{run_dir}", "--record", "--episodes", "1")
    assert result.exit_code == 0, result.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["enjoy.gif", "enjoy_metrics.json"]
    metrics = json.loads((out / "enjoy_metrics.json").read_text())
    frames = iio.imread(out / "enjoy.gif", index=None)
    assert frames.shape[1:] == CARTPOLE_FRAME
    # a GIF merges identical consecutive frames into one shown as long as they were
    with Image.open(out / "enjoy.gif") as gif:
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
    assert len(durations) == len(frames) <= metrics["video_frames"]
    assert metrics["video_frames"] == metrics["lengths"][0] + 1
    assert sum(durations) == pytest.approx(metrics["video_frames"] * 1000 / CARTPOLE_FPS)


@pytest.mark.cli
def test_a_replay_that_fails_leaves_no_video_nor_folder(
    video_run: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_play(env: Any, act: Any, episodes: int, recording: Any) -> None:
        env.step(act(env.obs))
        recording.add(env.frames())
        raise RuntimeError("the env broke")

    monkeypatch.setattr(control, "play_episodes", failing_play)
    _, run_dir = video_run
    result, out = enjoy(run_dir.parent.parent, f"enjoy@{run_dir}", "--record")
    assert isinstance(result.exception, RuntimeError)
    assert out is None
    assert not list(run_dir.parent.glob(".*"))


NO_RENDER_SOURCE = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np


    class NoRender(gym.Env):
        \"\"\"Declares no render mode.\"\"\"

        def __init__(self):
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.t = 0

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(2, np.float32), 1.0, False, self.t >= 5, {}


    gym.register(id="NoRender-v0", entry_point=f"{__name__}:NoRender")
    """
)


@pytest.mark.cli
def test_enjoy_record_of_an_env_that_cannot_render_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "norender_env.py").write_text(NO_RENDER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = make_spec("random", env="norender_env:NoRender-v0", max_frame=40, log_frequency=20)
    _, run_dir = train(tmp_path, "random_norender", spec)
    result, out = enjoy(tmp_path, f"enjoy@{run_dir}", "--record")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --record: NoRender-v0 cannot render frames (its render modes: none; a video needs rgb_array)"
    ]
    assert out is None and not list((tmp_path / "data").glob(".*"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["dev", "--record"],
            "--record writes a video of a replay: enjoy@<run folder> --record, not dev",
        ),
        (["train", "--record"], "not train"),
        (["enjoy@RUN", "--record", "--render"], "--record and --render: one or the other"),
    ],
)
def test_record_bad_input(
    args: list[str],
    fragment: str,
    video_run: tuple[Path, Path],
    in_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISPLAY", ":0")  # --render's own check passes
    spec_file, run_dir = video_run
    args = [a.replace("RUN", str(run_dir)) for a in args]
    result = invoke(["run", str(spec_file), NAME, *args])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and fragment in line
    assert not (in_tmp / "data").exists()


def unset(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Environment variables removed for the test, and after it as before it (whatever the
    test sets them to meanwhile)."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_mujoco_gl_is_the_first_headless_backend_that_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tried: list[str] = []

    def probe(works: set[str]) -> Any:
        def run(args: list[str], env: dict[str, str], **kwargs: Any) -> Any:
            tried.append(env["MUJOCO_GL"])
            return subprocess.CompletedProcess(args, 0 if env["MUJOCO_GL"] in works else 1)

        return run

    unset(monkeypatch, "MUJOCO_GL", *render.DISPLAY_VARS)
    monkeypatch.setattr(subprocess, "run", probe({"osmesa"}))
    render.choose_mujoco_gl()
    assert tried == ["egl", "osmesa"] and os.environ["MUJOCO_GL"] == "osmesa"
    render.choose_mujoco_gl()  # set: left as it is
    assert tried == ["egl", "osmesa"]
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setattr(subprocess, "run", probe(set()))
    with pytest.raises(SpecError, match=r"^--record: MuJoCo cannot render without a display here"):
        render.choose_mujoco_gl()
    assert "MUJOCO_GL" not in os.environ


def test_with_a_display_nothing_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    unset(monkeypatch, "SDL_VIDEODRIVER", "MUJOCO_GL")
    render.headless()
    assert "SDL_VIDEODRIVER" not in os.environ and "MUJOCO_GL" not in os.environ


@pytest.mark.cli
@pytest.mark.atari
def test_enjoy_record_of_an_atari_game(tmp_path: Path) -> None:
    """Random on Pong with episodes cut at 50 steps: the single-env path that renders gives the
    native path's observations and a video of the screens at 60 / frameskip fps."""
    spec = make_spec("random", env="ALE/Pong-v5", max_frame=200, max_t=50, log_frequency=100)
    config = parse(EnvConfig, spec["env"], "env")
    native = atari_backend.spaces(config)[0]
    recorded = atari_backend._vector(config, 1, render.RENDER_MODE)
    assert recorded.single_observation_space == native
    recorded.close()
    _, run_dir = train(tmp_path, "random_pong", spec)
    result, out = enjoy(tmp_path, f"enjoy@{run_dir}", "--record", "--episodes", "1")
    assert result.exit_code == 0, result.stderr[-3000:]
    metrics = json.loads((out / "enjoy_metrics.json").read_text())
    frames, fps = read_video(out / "enjoy.mp4")
    assert len(frames) == metrics["lengths"][0] + 1 and metrics["lengths"][0] <= 50
    assert all(f.shape == ATARI_FRAME for f in frames)
    assert fps == atari_backend.ATARI_FPS / 4


def enjoy_headless(workdir: Path, run_dir: Path, episodes: int) -> Path:
    """`slm-lab run enjoy@<run_dir> --record` in a fresh process without a display nor
    MUJOCO_GL: its enjoy folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", *render.DISPLAY_VARS)}
    proc = subprocess.run(
        [SLM_LAB, "run", f"enjoy@{run_dir}", "--record", "--episodes", str(episodes)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [out] = [p for p in run_dirs(workdir / "data") if "_enjoy_" in p.name]
    return out


@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.mujoco
def test_enjoy_record_of_a_mujoco_env_headless(tmp_path: Path) -> None:
    """In a fresh process without a display nor MUJOCO_GL: a headless GL backend is found."""
    spec = make_spec("random", env="InvertedPendulum-v5", max_frame=80, max_t=20, log_frequency=40)
    _, run_dir = train(tmp_path, "random_pendulum", spec)
    out = enjoy_headless(tmp_path, run_dir, 1)
    metrics = json.loads((out / "enjoy_metrics.json").read_text())
    frames, _ = read_video(out / "enjoy.mp4")
    assert len(frames) == metrics["lengths"][0] + 1
    assert frames[0].std() > 0  # a rendered scene, not a blank context


@pytest.mark.cli
@pytest.mark.subprocess
@pytest.mark.playground
# the replay's process is started after the run imported JAX here: fork, then exec at once
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_enjoy_record_of_a_playground_env_headless(tmp_path: Path) -> None:
    """A tiny PPO run on a Playground env, replayed in a fresh process without a display nor
    MUJOCO_GL: each episode whole (T + 1 frames) at 1 / (ctrl_dt x action_repeat) fps."""
    pytest.importorskip("mujoco_playground")
    from slm_lab.env import playground_backend

    spec = make_spec(
        "ppo", env="playground/CartpoleBalance", max_frame=160, max_t=20, log_frequency=80
    )
    _, run_dir = train(tmp_path, "ppo_cartpole_balance", spec)
    out = enjoy_headless(tmp_path, run_dir, 2)
    metrics = json.loads((out / "enjoy_metrics.json").read_text())
    assert metrics["lengths"] == [20, 20]
    assert all(type(n) is int for n in metrics["lengths"])  # whole steps, as Gymnasium's
    frames, fps = read_video(out / "enjoy.mp4")
    assert len(frames) == metrics["video_frames"] == sum(metrics["lengths"]) + 2
    assert fps == 100.0  # CartpoleBalance's ctrl_dt is 0.01 s, its action_repeat 1
    assert all(f.shape == (*playground_backend.FRAME_SIZE, 3) for f in frames)
    assert frames[0].std() > 0 and not np.array_equal(frames[0], frames[20])
