#!/usr/bin/env bash
# Run benchmark specs in train mode (4 sessions each), one after another, appending each run's
# trial_metrics line and run folder to bench/out/benchmarks.txt.
# usage: bench/run_benchmarks.sh ppo/ppo_cartpole:ppo_cartpole a2c/a2c_gae_cartpole:a2c_gae_cartpole ...
set -u
mkdir -p bench/out
for item in "$@"; do
  file="${item%%:*}"; name="${item##*:}"
  start=$(date +%s)
  out=$(uv run slm-lab run "slm_lab/spec/benchmark/${file}.json" "$name" train --log-level WARNING 2>>"bench/out/${name}.err")
  echo "$(date -u +%FT%TZ) ${name} ($(( $(date +%s) - start ))s): $(echo "$out" | tr '\n' ' ')" >> bench/out/benchmarks.txt
done
