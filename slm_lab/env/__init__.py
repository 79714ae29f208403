"""Environments: `vec_env.VecEnv`, wrappers, clock; `config` declares the env spec keys, torch-free."""
