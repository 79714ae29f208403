"""The spec key set: every key SLM Lab reads, its type, and v5 keys kept only for compatibility.

Types: int, float (int or float), bool, str, list, dict, any; a trailing '?' allows null.
"""

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

ALGORITHM = {
    "name": "str",
    "action_pdtype": "str?",
    "action_policy": "str?",
    "explore_var_spec": "dict?",
    "gamma": "float?",
    "lam": "float?",
    "num_step_returns": "int?",
    "entropy_coef_spec": "dict?",
    "val_loss_coef": "float?",
    "training_frequency": "int?",
    "normalize_v_targets": "bool?",
    "clip_eps_spec": "dict?",
    "time_horizon": "int?",
    "minibatch_size": "int?",
    "training_epoch": "int?",
    "clip_vloss": "bool?",
    "target_kl": "float?",
    "num_unrolls": "int?",
    "center_return": "bool?",
    "normalize_advs": "bool?",
    # off-policy training schedule (DQN family, SAC, CrossQ) and SIL
    "training_start_step": "float?",
    "training_iter": "int?",
    "training_batch_iter": "int?",
    "policy_delay": "int?",
    "target_entropy": "any",
    "fixed_alpha": "float?",
    "alpha_lr": "float?",
    "sil_policy_loss_coef": "float?",
    "sil_val_loss_coef": "float?",
    "policy_loss_coef": "float?",
}

MEMORY = {
    "name": "str?",
    "max_size": "int?",
    "batch_size": "int?",
    "use_cer": "bool?",
    "alpha": "float?",
    "epsilon": "float?",
    "beta": "float?",
    "beta_end_step": "float?",
    "sil_replay_name": "str?",
}

NET = {
    "type": "str",
    "shared": "bool?",
    "hid_layers": "list?",
    "hid_layers_activation": "str?",
    "out_layer_activation": "str?",
    "init_fn": "str?",
    "normalize": "bool?",
    "batch_norm": "bool?",
    "layer_norm": "bool?",
    "batch_renorm": "bool?",
    "batch_renorm_warmup_steps": "int?",
    "conv_hid_layers": "list?",
    "fc_hid_layers": "list?",
    "cell_type": "str?",
    "rnn_hidden_size": "int?",
    "rnn_num_layers": "int?",
    "seq_len": "int?",
    "bidirectional": "bool?",
    "clip_grad_val": "float?",
    "use_same_optim": "bool?",
    "loss_spec": "dict?",
    "optim_spec": "dict?",
    "lr_scheduler_spec": "dict?",
    "log_std_init": "float?",
    "init_std": "float?",
    "gpu": "any",
    # target nets (DQN family, SAC)
    "update_type": "str?",
    "update_frequency": "float?",
    "polyak_coef": "float?",
    # TorchArcNet (SLM Lab v5.1+): a torcharc graph spec, inline or by path
    "arc": "dict?",
    "arc_file": "str?",
}
# net keys that may carry an actor_/critic_ prefix to configure one of the two nets
NET_ROLE_KEYS = {
    "hid_layers",
    "hid_layers_activation",
    "init_fn",
    "clip_grad_val",
    "optim_spec",
    "lr_scheduler_spec",
    "log_std_init",
    "init_std",
    "layer_norm",
    "batch_norm",
    "batch_renorm",
    "batch_renorm_warmup_steps",
    "conv_hid_layers",
    "fc_hid_layers",
    "cell_type",
    "rnn_hidden_size",
    "rnn_num_layers",
    "out_layer_activation",
    "arc",
    "arc_file",
}

ENV = {
    "name": "str",
    "num_envs": "int?",
    "max_t": "int?",
    "max_frame": "float",
    "normalize_obs": "bool?",
    "normalize_reward": "bool?",
    "clip_obs": "float?",
    "clip_reward": "any",
    "reward_scale": "float?",
    "action_repeat": "int?",
    "life_loss_info": "bool?",
    "vectorization_mode": "str?",
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

ACTION_POLICIES = ("default", "epsilon_greedy", "boltzmann", "greedy")
# Argmax: v5's name for the discrete distribution value-based specs declare (actions then follow
# action_policy); it is accepted for discrete action spaces like Categorical
ACTION_PDTYPES = ("default", "Categorical", "Argmax", "Normal")
DISCRETE_PDTYPES = ("Categorical", "Argmax")
NET_TYPES = ("MLPNet", "ConvNet", "RecurrentNet", "DuelingMLPNet", "DuelingConvNet", "TorchArcNet")
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
