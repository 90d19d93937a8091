#!/usr/bin/env bash
# The main job: set up (idempotent; the theory core, matplotlib, and cvxpy for figure 11's KL
# frontier), run the report on built-in defaults, then draw the quick figures into out/figures
# (the committed full-size figures are in figures/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh figures,cvxpy
.venv/bin/spectheory report "$@"
.venv/bin/spectheory figures --quick --out out/figures
