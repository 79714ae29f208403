"""The spec key set: the run-level sections (top, agent, meta, schedules, search) and, from each
component's torch-free config module, the algorithm, memory, net and env keys; plus the v5 keys
kept only for compatibility.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
"""

from slm_lab.agent.algorithm.config import ALGORITHM  # noqa: F401  (re-exported)
from slm_lab.agent.memory.config import MEMORY  # noqa: F401
from slm_lab.agent.net.config import NET, NET_ROLE_KEYS  # noqa: F401
from slm_lab.env.config import ENV  # noqa: F401

SCHEDULE_KEYS = {
    "name": "str",
    "start_val": "float",
    "end_val": "float?",
    "start_step": "float?",
    "end_step": "float?",
}

TOP = {
    "agent": "dict",
    "env": "dict",
    "meta": "dict",
    "search": "dict?",
    "name": "str?",
    "run_info": "dict?",
}

AGENT = {
    "name": "str?",
    "algorithm": "dict",
    "memory": "dict?",
    "net": "dict?",
    "critic_net": "dict?",
}

META = {
    "distributed": "any",
    "log_frequency": "float?",
    "eval_frequency": "float?",
    "rigorous_eval": "int?",
    "max_session": "int?",
    "max_trial": "int?",
    "search_resources": "dict?",
    "search_scheduler": "dict?",
    "random_seed": "int?",
    "num_threads": "int?",
}

# keys that v5 spec files carry but v5 never read: warned about, then ignored
DEPRECATED = {
    "agent.algorithm.clip_val_loss": "clip_vloss",
    "agent.net.lr_decay_frequency": "lr_scheduler_spec",
    "agent.net.lr_decay": "lr_scheduler_spec",
    "agent.net.lr_decay_min_timestep": "lr_scheduler_spec",
    "meta.num_gpus": "agent.net.gpu",
    "meta.resume": "the train@<run folder> mode",
    "meta.training_eval": "meta.eval_frequency",
    "body": None,
    "env.frame_op": None,
    "env.frame_op_len": None,
}

SEARCH_DISTS = (
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "randn",
    "qrandn",
    "randint",
    "qrandint",
    "lograndint",
    "choice",
    "grid_search",
)
