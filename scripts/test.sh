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
trap 'rm -rf "$site" "$site.warm" "$site.collect"' EXIT
# Bytecode is written (see the pytest step below), also by the collection here
unset PYTHONDONTWRITEBYTECODE
# numba's kernels compiled into their on-disk cache while the documentation builds (else each
# pytest worker that first takes a compiled route compiles them again: ~6 s of CPU each)
.venv/bin/python scripts/warm_kernels.py > "$site.warm" 2>&1 &
warm=$!
# the test modules collected once while the documentation builds: pytest rewrites the asserts of
# each test module it imports and caches the result beside it (tests/__pycache__); with no cached
# copy, each xdist worker rewrote all of them (about 4.4 s of CPU a worker on a fresh checkout).
# A failure here is left to the pytest step below, which reports it.
.venv/bin/python -m pytest --collect-only -q -p no:cacheprovider > "$site.collect" 2>&1 &
collect=$!
# not --quiet: it hides the warnings that --strict counts, and the build would always pass
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --site-dir "$site"
if ! wait "$warm"; then
    cat "$site.warm" >&2
    rm -f "$site.warm"
    exit 1
fi
cat "$site.warm"
rm -f "$site.warm"
wait "$collect" || true
rm -f "$site.collect"
# One pytest-xdist worker per core, at most 4 (each worker holds its own torch, ~0.5-0.8 GB);
# SPECTHEORY_TEST_WORKERS overrides (0: no workers, one process). --dist loadgroup keeps the tests
# of the one local Ray cluster on one worker (tests/conftest.py groups them). Arguments pass
# through to pytest and come last, so an `-n` given here wins (`bash scripts/test.sh -n 0`).
# Bytecode is written and the sources compiled once up front: with PYTHONDONTWRITEBYTECODE set,
# every xdist worker and every command-line subprocess of the tests compiled the package again
# and pytest rewrote each test file's assertions again in each worker (collection 14.7 s a
# worker without the caches, 8.6 s with them).
.venv/bin/python -m compileall -q -j 0 spectheory lp toy_models gpu_validation > /dev/null
workers="${SPECTHEORY_TEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}"
if [ -z "${SPECTHEORY_TEST_WORKERS:-}" ] && [ "$workers" -gt 4 ]; then
    workers=4
fi
.venv/bin/python -m pytest -q -n "$workers" --dist loadgroup "$@"
