#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned CUDA toolchain if
# needed, checks formatting, runs every test. No GPU needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup-toolchain.sh >/dev/null
cargo fmt --all -- --check
# `gpusan run` tests inject this library; cargo does not build a cdylib for other crates' tests.
cargo build --locked -p gpusan-inject
cargo test --workspace --locked "$@"
# The binary route's measurement scripts on fakes (a few seconds; no GPU).
python3 bench/test_binary_route.py
# The hook-cost benchmark's statistics on fakes (issue 15; a few seconds; no GPU).
python3 bench/test_hook_cost.py
# The canary-mode GPU cases and overhead benchmark on fakes (issue 17; ~30 s; no GPU).
python3 bench/canary/test_canary.py
# The wheel in a fresh virtual environment, pip with local files only (python/, < 30 s).
scripts/python-wheel.sh
