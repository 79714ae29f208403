"""What bounds PPO Atari's speed against SB3: the Nature CNN's minibatch step in both layouts.

A `ppo_atari` training minibatch (256 stacked 84x84x4 uint8 frames) makes the frames float,
divides them by 255, and runs the Nature CNN forward and backward. Both libraries do this on the
same torch; SLM Lab's `ConvNet` keeps its weights and input in channels_last (NHWC), where
oneDNN's CPU convolutions are faster, and SB3's `NatureCNN` in torch's default NCHW. This times
that step alone on one torch thread, in both layouts, in interleaved rounds, and then each
convolution's forward and weight gradient (the first one's input needs no gradient), so that
the ratio the training itself can reach is measured rather than guessed.

usage: uv run --group bench python bench/nature_cnn_layout.py [--rounds 5] [--reps 4]
"""

import statistics
from typing import Annotated

import torch
import typer
from sac_matmul_floor import ms_per_call
from torch import nn

BATCH = 256
FRAMES = (4, 84, 84)
ACTIONS = 6  # Pong's
WARMUP = 1  # untimed calls before each timing (a call is ~0.2 s)
LAYOUTS = ("channels_last", "NCHW")
CONVS = ((4, 32, 8, 4, 84), (32, 64, 4, 2, 20), (64, 64, 3, 1, 9))  # in, out, kernel, stride, size
app = typer.Typer(add_completion=False, rich_markup_mode=None)


def nature_cnn(channels_last: bool) -> nn.Module:
    net = nn.Sequential(
        nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
        nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, ACTIONS),
    )  # fmt: skip
    return net.to(memory_format=torch.channels_last) if channels_last else net


@app.command()
def main(
    rounds: Annotated[int, typer.Option(help="interleaved rounds")] = 5,
    reps: Annotated[int, typer.Option(help="minibatch steps per round")] = 4,
) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    frames = torch.randint(0, 256, (BATCH, *FRAMES), dtype=torch.uint8)
    nets = {layout: nature_cnn(layout == "channels_last") for layout in LAYOUTS}

    def step(layout: str) -> None:
        x = frames.float()
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        nets[layout](x.div_(255)).sum().backward()

    ms: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    for i in range(rounds):
        for layout in LAYOUTS if i % 2 == 0 else LAYOUTS[::-1]:
            ms[layout].append(ms_per_call(lambda layout=layout: step(layout), reps, WARMUP))
    for layout, times in ms.items():
        rounds_ms = ", ".join(f"{t:.0f}" for t in times)
        typer.echo(
            f"{layout:14s} {statistics.median(times):6.1f} ms a minibatch step (rounds {rounds_ms})"
        )
    ratio = statistics.median(ms["NCHW"]) / statistics.median(ms["channels_last"])
    typer.echo(f"NCHW / channels_last: {ratio:.2f}")

    for c_in, c_out, kernel, stride, size in CONVS:
        for layout in LAYOUTS:
            conv = nn.Conv2d(c_in, c_out, kernel, stride)
            x = torch.randn(BATCH, c_in, size, size)
            if layout == "channels_last":
                conv = conv.to(memory_format=torch.channels_last)
                x = x.contiguous(memory_format=torch.channels_last)
            grad = torch.randn_like(conv(x))
            forward = ms_per_call(lambda conv=conv, x=x: conv(x), reps, WARMUP)
            both = ms_per_call(
                lambda conv=conv, x=x, grad=grad: torch.autograd.grad(
                    conv(x), [conv.weight, conv.bias], grad
                ),
                reps,
                WARMUP,
            )
            typer.echo(
                f"conv {c_in}->{c_out} k{kernel} s{stride} {layout:14s} forward {forward:5.1f} ms, "
                f"weight gradient {both - forward:5.1f} ms"
            )


if __name__ == "__main__":
    app()
