#!/usr/bin/env bash
# The README's main job: set up (idempotent), run the report on built-in defaults, then draw the
# quick figures into out/figures (the committed full-size figures are in figures/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/spectheory report "$@"
.venv/bin/spectheory figures --quick --out out/figures
