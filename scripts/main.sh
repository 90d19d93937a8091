#!/usr/bin/env bash
# The README's main job: set up (idempotent) and run the report on built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/spectheory report "$@"
