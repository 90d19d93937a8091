#!/usr/bin/env bash
# The README's test command: set up (idempotent), check the import layers, run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the import layers of pyproject.toml ([tool.importlinter]), on this checkout's sources
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" .venv/bin/lint-imports --no-cache
.venv/bin/python -m pytest -q "$@"
