"""The spec key reference (docs/SPEC.md), written from the components' declared configs.

`python -m slm_lab.spec.reference > docs/SPEC.md` regenerates it; a test checks the committed
file is what the declarations say.
"""

import json
from dataclasses import fields

from slm_lab import SPEC_DIR
from slm_lab.agent.algorithm.config import ALGORITHM_CONFIGS
from slm_lab.agent.memory.config import MEMORY_CONFIGS, SILMemoryConfig
from slm_lab.agent.net.config import (
    NET_ROLE_KEYS,
    LossSpec,
    LRSchedulerSpec,
    NetConfig,
    OptimSpec,
)
from slm_lab.env.config import EnvConfig
from slm_lab.experiment.config import MetaConfig, SearchResourcesConfig, SearchSchedulerConfig
from slm_lab.lib.config import Config, default_text, hints, info, type_name
from slm_lab.lib.schedule import ScheduleConfig

HEADER = """# Spec reference

Every key a spec can hold, by section: its type, its default (`required` when it has none) and
what it does. This page is generated from the declarations in the code
(`python -m slm_lab.spec.reference > docs/SPEC.md`); a test keeps the two in step. A key set to
`null` takes its default, except a default `not set`: that key left out and that key set to
null differ (e.g. `env.clip_obs`). `slm-lab check SPEC_FILE` validates a spec against all of
this without running it.
"""


def table(cls: type[Config], readers_of: dict[str, str] | None = None) -> list[str]:
    """A markdown table of a config's keys (with a column of readers when given)."""
    cols = ["key", "type", "default", "meaning"] + (["read by"] if readers_of else [])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, f in cls.keys().items():
        row = [f"`{name}`", type_name(hints(cls)[name]), f"`{default_text(f)}`", info(f).doc]
        if readers_of:
            row.append(readers_of[name])
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    if cls.EXTRA is not None:
        extra = next(f for f in fields(cls) if f.name == cls.EXTRA)
        lines.append(f"\nAny other key: {info(extra).doc}.")
    if cls.DEPRECATED:
        keys = ", ".join(f"`{k}`" for k in cls.DEPRECATED)
        lines.append(
            f"\nAccepted with a warning and ignored (SLM Lab v5 keys it never read): {keys}."
        )
    return lines


def algorithm_section() -> list[str]:
    """One row per declaration of a key: a key that algorithms declare differently (e.g.
    training_frequency, steps for on-policy and frames for off-policy) has one row each."""
    rows: dict[tuple[str, str, str, str], list[str]] = {}
    for algo, cls in ALGORITHM_CONFIGS.items():
        for name, f in cls.keys().items():
            declared = (name, type_name(hints(cls)[name]), default_text(f), info(f).doc)
            rows.setdefault(declared, []).append(algo)
    lines = ["| key | type | default | meaning | read by |", "|---|---|---|---|---|"]
    for (name, tp, default, doc), algos in rows.items():
        who = "all" if len(algos) == len(ALGORITHM_CONFIGS) else ", ".join(algos)
        row = [f"`{name}`", tp, f"`{default}`", doc, who]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return lines


# one shipped benchmark spec per algorithm family: (file under slm_lab/spec, spec name, what it shows)
EXAMPLES = [
    (
        "benchmark/reinforce/reinforce_cartpole.json",
        "reinforce_cartpole",
        "REINFORCE: Monte-Carlo policy gradient with an on-policy episode memory.",
    ),
    (
        "benchmark/a2c/a2c_gae_cartpole.json",
        "a2c_gae_cartpole",
        "A2C with GAE (`lam`), separate actor and critic nets with their own optimizers (`actor_`/`critic_` keys).",
    ),
    (
        "benchmark/ppo/ppo_cartpole.json",
        "ppo_cartpole",
        "PPO: `time_horizon` steps from each env per batch, `training_epoch` passes of `minibatch_size`, clip and entropy schedules.",
    ),
    (
        "benchmark/sil/ppo_sil_cartpole.json",
        "ppo_sil_cartpole",
        "PPO with self-imitation: the memory section also holds the self-imitation replay's keys.",
    ),
    (
        "benchmark/sarsa/sarsa_cartpole.json",
        "sarsa_cartpole",
        "SARSA: on-policy TD with an epsilon-greedy schedule (`explore_var_spec`).",
    ),
    (
        "benchmark/dqn/ddqn_per_cartpole.json",
        "ddqn_per_cartpole",
        "Double DQN with prioritized replay; the target net's keys (`update_type`, `update_frequency`) sit in the net section.",
    ),
    (
        "benchmark/sac/sac_pendulum.json",
        "sac_pendulum",
        "SAC for continuous actions: twin critics, polyak target critics, automatic entropy tuning.",
    ),
    (
        "benchmark/crossq/crossq_pendulum.json",
        "crossq_pendulum",
        "CrossQ: SAC without target nets; the critics have their own `critic_net` section with batch renormalization.",
    ),
]


def examples_section() -> list[str]:
    lines = [
        "## Worked examples",
        "",
        "One shipped benchmark spec per algorithm family (run any of them with "
        "`slm-lab run slm_lab/spec/<file> <name> train`; the benchmarks' results are in "
        "docs/BENCHMARKS.md).",
        "",
    ]
    for file, name, what in EXAMPLES:
        spec = json.loads((SPEC_DIR / file).read_text())[name]
        lines += [f"### {name} (`slm_lab/spec/{file}`)", "", what, "", "```json"]
        lines += [json.dumps(spec, indent=2), "```", ""]
    return lines


SEARCH_TEXT = """What `search` mode samples (other modes ignore the block). Each leaf is a dotted spec
path with a distribution suffix and the distribution's arguments, written flat or nested as
SLM Lab v5 specs write it:

```json
"search": {
  "agent.algorithm.gamma__uniform": [0.98, 0.999],
  "agent": {"net": {"actor_optim_spec": {"lr__loguniform": [1e-4, 1e-2]}}}
}
```

| distribution | arguments | draws |
|---|---|---|
| `uniform` | `[lo, hi]` | a float in [lo, hi] |
| `quniform` | `[lo, hi, q]` | uniform, rounded to a multiple of q; lo and hi must be multiples of q |
| `loguniform` | `[lo, hi]` | a float in [lo, hi], uniform in log space (lo > 0) |
| `qloguniform` | `[lo, hi, q]` | loguniform, rounded to a multiple of q; lo and hi must be multiples of q |
| `randn` | `[mean, sd]` | a normal float |
| `qrandn` | `[mean, sd, q]` | randn, rounded to a multiple of q |
| `randint` | `[lo, hi]` | an int in [lo, hi): hi excluded |
| `qrandint` | `[lo, hi, q]` | a multiple of q in [lo, hi], each as likely: hi included, except with q = 1 (then it is `randint`, hi excluded) |
| `lograndint` | `[lo, hi]` | an int in [lo, hi): a float uniform in log space, floored (lo > 0; hi excluded) |
| `qlograndint` | `[lo, hi, q]` | a multiple of q in [lo, hi], `lograndint` over the multiples' indices: hi included, except with q = 1 (then it is `lograndint`) |
| `choice` | `[v1, v2, ...]` | one of the values (any JSON value) |

These are Ray Tune's distributions, with its bounds and weights. A quantized int distribution
draws the multiples of q inside its bounds: `qlograndint [1, 100, 10]` draws 10 to 100, and
`qrandint [3, 20, 5]` 5 to 20; with no multiple inside, it is refused. A quantized float
distribution refuses bounds that are not multiples of q, as Ray Tune does (rounded draws would
leave them). A rounded float's bounds are half as likely as the multiples between them.

A path must name a key its section reads (`agent.algorithm`, `agent.memory`, `agent.net`,
`agent.critic_net`, `env` (its own arguments too) or `meta`, not `meta.max_trial` nor the
search's own settings); `slm-lab check` validates the spec with the path set to the smallest
and largest value the distribution draws (and a non-integral one, where it draws one), and to
each choice. `grid_search` is refused: Optuna samples, use `choice`."""


def render() -> str:
    out = [HEADER]
    out += [
        "## agent.algorithm",
        "",
        f"`name` is one of: {', '.join(f'`{n}`' for n in ALGORITHM_CONFIGS)}. A key that another "
        "algorithm reads but this one does not is accepted with a warning that names its readers.",
        "",
        *algorithm_section(),
        "",
        "### Schedules (`explore_var_spec`, `entropy_coef_spec`, `clip_eps_spec`)",
        "",
        "Steps are frames; in evaluation a schedule gives its `end_val`. A schedule that should "
        "follow the run's length gives `end_frac` (a fraction of `env.max_frame`) instead of "
        "`end_step`: `--max-frame`, `-s env.max_frame=...` and a `train@` extension then stretch "
        "it (an extension moves a value that had reached its end back along the schedule). An `lr_scheduler_spec` without `frame` and a prioritized replay's `beta_end_step: "
        "null` follow `max_frame` the same way. A run whose absolute schedule does not fit its "
        "`max_frame` (an LR, entropy or clip schedule that ends before or after it, an exploration "
        "or beta schedule that never reaches its end) gets one warning at its start, resumed and "
        "extended runs included. The shipped specs give every schedule this way.",
        "",
        *table(ScheduleConfig),
        "",
        "## agent.memory",
        "",
    ]
    for name, cls in MEMORY_CONFIGS.items():
        out += [f"### {name}", "", *table(cls), ""]
    out += [
        "### SIL and PPOSIL",
        "",
        "The on-policy memory's section also holds the self-imitation replay's keys:",
        "",
        *table(SILMemoryConfig),
        "",
        "## agent.net (and agent.critic_net)",
        "",
        "`critic_net` (SoftActorCritic, CrossQ) gives the critics their own net section. "
        "These keys may also carry an `actor_` or `critic_` prefix to set them for one of the "
        f"two nets: {', '.join(f'`{k}`' for k in NET_ROLE_KEYS)}.",
        "",
        *table(NetConfig),
        "",
        "### optim_spec",
        "",
        *table(OptimSpec),
        "",
        "### lr_scheduler_spec",
        "",
        *table(LRSchedulerSpec),
        "",
        "### loss_spec",
        "",
        *table(LossSpec),
        "",
        "## env",
        "",
        *table(EnvConfig),
        "",
        "## meta",
        "",
        *table(MetaConfig),
        "",
        "### search_resources",
        "",
        *table(SearchResourcesConfig),
        "",
        "### search_scheduler",
        "",
        *table(SearchSchedulerConfig),
        "",
        "## search",
        "",
        SEARCH_TEXT,
        "",
        *examples_section(),
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
