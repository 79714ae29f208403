"""A video of replayed episodes, written frame by frame with imageio: an MP4 through
imageio-ffmpeg's ffmpeg (H.264), or a GIF where no ffmpeg is installed.

The file is written under a hidden temporary name beside its folder and moved into place when
it is complete: an error or a stop on the way leaves no part of it.
"""

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import imageio.v2 as imageio
import numpy as np

# H.264 in yuv420p needs even sides: a frame with an odd one is resized up by imageio
MP4_MACRO_BLOCK = 2
MS_PER_S = 1000


def video_suffix() -> str:
    """.mp4 where imageio-ffmpeg has an ffmpeg to run, else .gif."""
    try:
        import imageio_ffmpeg  # the optional MP4 writer: an install may leave it out

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return ".gif"
    return ".mp4"


class Video:
    """An open video file: `add` frames to it."""

    def __init__(self, writer: Any) -> None:
        """`writer`: imageio's."""
        self.writer = writer
        self.frames = 0

    def add(self, frames: Sequence[np.ndarray]) -> None:
        for frame in frames:
            self.writer.append_data(frame)
        self.frames += len(frames)


@contextlib.contextmanager
def video_file(path: Path, fps: float) -> Iterator[Video]:
    """A video written to `path` (its suffix says the format: `video_suffix`) at `fps` frames
    per second, in place once the block ends without an error; its folder is made then."""
    tmp = path.parent.parent / f".{path.parent.name}_{path.name}"
    if path.suffix == ".mp4":
        writer = imageio.get_writer(tmp, fps=fps, macro_block_size=MP4_MACRO_BLOCK)
    else:
        writer = imageio.get_writer(tmp, duration=MS_PER_S / fps, loop=0)
    try:
        yield Video(writer)
        writer.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):  # the error that got here is the one to report
            writer.close()
        tmp.unlink(missing_ok=True)
        raise
