#!/usr/bin/env bash
# Create .venv (idempotent) and install spectheory in editable mode with the extras named in the
# first argument (comma-separated, e.g. `bash scripts/setup.sh test,docs`; none: the theory core).
#   figures  matplotlib, for `spectheory figures`
#   cvxpy    the LPs through cvxpy
#   models   transformers, accelerate, gguf: the real-model commands (`spectheory models`,
#            `spectheory validate`)
#   test     pytest, hypothesis and the figures and cvxpy extras
#   docs     mkdocs, mkdocs-material, mkdocstrings
# constraints.txt pins versions (torch among them). Which torch build pip picks, CPU or CUDA,
# depends on the index: on PyPI alone the default Linux wheel is the CUDA build. For the CPU
# build, install it first:
#   .venv/bin/python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
target="."
if [ -n "$extras" ]; then
    target=".[${extras}]"
fi
# setuptools warns on every editable install of a package whose folders are mapped (lp/,
# toy_models/ and gpu_validation/ install as spectheory.lp, ...) that a folder named like the
# package in the working directory could shadow it: here that folder is the package itself.
PYTHONWARNINGS="ignore:Editable installation" \
    .venv/bin/python -m pip install -q -c constraints.txt -e "$target"
