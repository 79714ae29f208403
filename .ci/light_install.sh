#!/usr/bin/env bash
# CI: the light core install (uv sync --no-default-groups: no torch, no Gymnasium), synced into
# its own environment .venv-light beside the full .venv, runs the commands README's Install
# section names for it, and `run` says in one line that it needs the full install
# (test/cli/light_install.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export UV_PROJECT_ENVIRONMENT=.venv-light
start=$SECONDS
uv sync --frozen --no-default-groups
light=(uv run --frozen --no-default-groups --no-sync)
"${light[@]}" python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
"${light[@]}" python test/cli/light_install.py
echo "light install: synced and checked in $((SECONDS - start))s"
