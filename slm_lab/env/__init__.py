"""Environments: the backend interface (`backend`), the registry that picks a backend for an env
id (`registry`), Gymnasium's vector envs as a backend (`gym_backend`), wrappers and the clock;
`config` declares the env spec keys, torch-free."""
