#!/usr/bin/env bash
# Check the import layers of pyproject.toml ([tool.importlinter]) on this checkout's sources, laid
# out as they install: lp/, toy_models/, gpu_validation/ and figures/ become spectheory.lp,
# spectheory.toy_models, spectheory.gpu_validation and spectheory.gallery (pyproject's
# package-dir), in a temporary copy that import-linter walks.
set -euo pipefail
cd "$(dirname "$0")/.."
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
copy() { (cd "$1" && find . -name '*.py' -not -path '*/__pycache__/*' -print0 \
    | xargs -0 -I{} install -D -m 644 {} "$stage/$2/{}"); }
copy spectheory spectheory
copy lp spectheory/lp
copy toy_models spectheory/toy_models
copy gpu_validation spectheory/gpu_validation
copy figures spectheory/gallery
repo="$PWD"
cd "$stage"
PYTHONPATH="$stage${PYTHONPATH:+:$PYTHONPATH}" "$repo/.venv/bin/lint-imports" --no-cache "$repo/pyproject.toml"
