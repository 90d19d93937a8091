"""The documentation covers the code: every public module of the core, ``lp`` and ``toy_models``
has an API page (a ``::: module`` directive under docs/api/), every directive names a module that
exists, and every registered verifier has its section on the Verifiers page."""

from __future__ import annotations

import re
from pathlib import Path

from spectheory.registry import registered

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the package it installs as (pyproject.toml's package-dir)
PACKAGES = {"spectheory": "spectheory", "lp": "spectheory.lp", "toy_models": "spectheory.toy_models"}
#: Modules with no API page on purpose: the command-line layer (`spectheory.cli`, documented by its
#: --help and the command examples of the docs) and ``python -m`` entry points.
NO_API_PAGE = re.compile(r"(^|\.)(\w+_)?(cli|commands|__main__|report|figures)$|^spectheory\.cli\.")


def modules() -> set[str]:
    found = set()
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if any(p.startswith("_") for p in parts):
                continue
            found.add(".".join((package, *parts)))
    return found


def directives() -> set[str]:
    names = set()
    for page in (ROOT / "docs").rglob("*.md"):
        names.update(re.findall(r"^::: ([\w.]+)", page.read_text(encoding="utf-8"), re.M))
    return names


def test_every_public_module_has_an_api_page():
    documented = directives()
    missing = sorted(m for m in modules() - documented if not NO_API_PAGE.search(m))
    assert not missing, (f"modules without an API page: {', '.join(missing)}; add "
                         "'::: MODULE' to a page under docs/api/ (and the page to mkdocs.yml)")


def test_every_directive_names_an_existing_object():
    known = modules()
    for name in directives():
        parts = name.split(".")
        # a module, or an object inside one
        assert any(".".join(parts[:i]) in known for i in range(len(parts), 0, -1)), name


def test_every_registered_verifier_has_a_section():
    text = (ROOT / "docs" / "verifiers.md").read_text(encoding="utf-8")
    headings = {name.strip() for line in re.findall(r"^### (.+)$", text, re.M)
                for name in line.split(",")}
    missing = sorted(set(registered()) - headings)
    assert not missing, f"verifiers without a section in docs/verifiers.md: {', '.join(missing)}"
