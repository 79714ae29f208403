#!/usr/bin/env bash
# CI: the light core install (the project in light/: no torch, no Gymnasium), as README's Install
# section has a user make it, `cd light` and a plain `uv run`, runs the commands that section
# names, and `run` says in one line that it needs the full install (test/cli/light_install.py).
set -euo pipefail
cd "$(dirname "$0")/../light"
start=$SECONDS
uv lock --check  # light/uv.lock is up to date with the core's dependencies
uv run slm-lab plot-list ../test/fixtures/v5_run   # the first uv run installs the light core
uv run python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
uv run python ../test/cli/light_install.py
echo "light install: synced and checked in $((SECONDS - start))s"
