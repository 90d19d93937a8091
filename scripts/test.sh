#!/usr/bin/env bash
# The test command (what CI runs): set up (idempotent; test, docs and the real-model extras, so
# the real-model loop is tested on tiny models), check the import layers, build the documentation
# strictly (a broken link or a missing API page fails), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,docs,models
# the import layers of pyproject.toml ([tool.importlinter]), on this checkout's sources
bash scripts/lint_imports.sh
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
# not --quiet: it hides the warnings that --strict counts, and the build would always pass
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --site-dir "$site"
.venv/bin/python -m pytest -q "$@"
