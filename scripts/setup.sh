#!/usr/bin/env bash
# Create .venv and install spectheory with its test extras. torch is pinned to the CPU build
# through constraints.txt (an unpinned torch pulls several GB of CUDA packages).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test,models]'
