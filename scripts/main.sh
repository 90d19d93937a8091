#!/usr/bin/env bash
# The main job: set up (idempotent; the theory core and matplotlib), run the report on built-in
# defaults, then draw the quick figures into out/figures (the committed full-size figures are in
# figures/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh figures
.venv/bin/spectheory report "$@"
.venv/bin/spectheory figures --quick --out out/figures
