"""What bounds PPO Atari's speed against SB3: the Nature CNN's minibatch step in both layouts.

A `ppo_atari` training minibatch (256 stacked 84x84x4 uint8 frames) makes the frames float,
divides them by 255, and runs the Nature CNN forward and backward. Both libraries do this on the
same torch; SLM Lab's `ConvNet` keeps its weights and input in channels_last (NHWC), where
oneDNN's CPU convolutions are faster, and SB3's `NatureCNN` in torch's default NCHW. This times
that step alone on one torch thread, in both layouts, in interleaved rounds, and then each
convolution's forward and weight gradient (the first one's input needs no gradient), so that
the ratio the training itself can reach is measured rather than guessed. A third variant is
SLM Lab's `precision: bf16-mixed`: channels_last, the frames made bfloat16 at once, the net
under torch.autocast to bfloat16 (fast where the CPU has AVX512-BF16 or AMX). With `--partial`,
two more keep the first layers in float32 and run the rest under autocast: from the second
convolution on, and from the third (is the speed in the layers whose weights bfloat16 moves
most? see bench/bf16_gradients.py).

usage: uv run --group bench python bench/nature_cnn_layout.py [--rounds 5] [--reps 4] [--partial]
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
BF16 = "channels_last bf16-mixed"
VARIANTS = (*LAYOUTS, BF16)
# float32 up to the body's layer index, bfloat16 from it: from the 2nd conv, from the 3rd
PARTIAL = {"bf16-mixed from conv 2": 2, "bf16-mixed from conv 3": 4}
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
    partial: Annotated[bool, typer.Option(help="also time the float32-first variants")] = False,
) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    frames = torch.randint(0, 256, (BATCH, *FRAMES), dtype=torch.uint8)
    variants = (*VARIANTS, *PARTIAL) if partial else VARIANTS
    nets = {variant: nature_cnn(variant != "NCHW") for variant in variants}

    def step(variant: str) -> None:
        if variant in PARTIAL:  # float32 layers first, the rest of the body in bfloat16
            x = frames.float().contiguous(memory_format=torch.channels_last).div_(255)
            split, net = PARTIAL[variant], nets[variant]
            h = net[:split](x)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = net[split:-1](h)
            net[-1](h.float()).sum().backward()
            return
        if variant == BF16:  # the body in bfloat16, the head float32, as SLM Lab's ConvNet
            x = frames.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
            body, head = nets[variant][:-1], nets[variant][-1]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = body(x.div_(255))
            head(h.float()).sum().backward()
            return
        x = frames.float()
        if variant == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        nets[variant](x.div_(255)).sum().backward()

    ms: dict[str, list[float]] = {variant: [] for variant in variants}
    for i in range(rounds):
        for variant in variants if i % 2 == 0 else variants[::-1]:
            ms[variant].append(ms_per_call(lambda variant=variant: step(variant), reps, WARMUP))
    for variant, times in ms.items():
        rounds_ms = ", ".join(f"{t:.0f}" for t in times)
        typer.echo(
            f"{variant:24s} {statistics.median(times):6.1f} ms a minibatch step "
            f"(rounds {rounds_ms})"
        )
    median = {variant: statistics.median(times) for variant, times in ms.items()}
    typer.echo(f"NCHW / channels_last: {median['NCHW'] / median['channels_last']:.2f}")
    typer.echo(f"NCHW / {BF16}: {median['NCHW'] / median[BF16]:.2f}")
    typer.echo(f"channels_last / {BF16}: {median['channels_last'] / median[BF16]:.2f}")
    for variant in PARTIAL if partial else ():
        typer.echo(f"channels_last / {variant}: {median['channels_last'] / median[variant]:.2f}")

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
