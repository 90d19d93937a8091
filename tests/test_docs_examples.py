"""The Python examples of the README and the docs run as printed, and the values their comments
state (``expr  # Fraction(19, 9)``, ``# True``, ...) are what they compute."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A line ``expression  # value ...`` whose comment starts with a literal the test can check.
CLAIM = re.compile(r"^(?P<expr>[^#]+?)\s+#\s+(?P<value>\(True, Fraction\(\d+, \d+\)\)|"
                   r"Fraction\(\d+, \d+\)|True|False)(?:$|[\s:,])")


def python_blocks(path: Path, after: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if after is not None:
        text = text[text.index(after):]
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_block(code: str) -> int:
    """Execute ``code`` line by line in one namespace; check every stated value. Returns the
    number of values checked."""
    ns: dict = {}
    checked = 0
    for line in code.splitlines():
        m = CLAIM.match(line)
        if m:
            value = eval(m.group("value"), {"Fraction": Fraction})
            assert eval(m.group("expr"), ns) == value, line
            checked += 1
        else:
            exec(line, ns)
    return checked


def test_readme_python_quickstart():
    code = python_blocks(ROOT / "README.md", after="## Quickstart: Python")[0]
    assert run_block(code) >= 5


@pytest.mark.parametrize("page", ["index.md", "exact-engine.md"])
def test_docs_first_python_example(page):
    code = python_blocks(ROOT / "docs" / page)[0]
    assert run_block(code) >= 2
