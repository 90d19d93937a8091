"""Docstrings are Markdown that mkdocstrings renders: no Sphinx roles, no reST literal blocks.

* the sources: no docstring or comment of the package folders holds a Sphinx role
  (``:func:`f` ``, ``:class:``, ...), and no docstring a reST literal-block marker (a line ending
  in ``::`` followed by an indented block);
* ``scripts/docstring_roles.py``, which rewrites them: cross-references fully qualified and only
  to documented objects (else plain backticks), literal blocks fenced, only docstrings and
  comments touched, a second run a no-op, a file edited meanwhile left alone;
* the mkdocs hook ``docs/hooks/docstring_markup.py`` that fails ``mkdocs build --strict`` when a
  page's HTML shows a raw role or literal-block marker (the build itself runs in
  ``scripts/test.sh``).
"""

from __future__ import annotations

import ast
import importlib.util
import io
import logging
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("spectheory", "lp", "toy_models", "gpu_validation", "figures", "benchmarks")
#: Any Sphinx role, with or without a domain: ``:name:`text` `` or ``:py:name:`text` ``.
ROLE = re.compile(r"(?<![\w`]):(?:[a-z]+:)?[a-z]+(?:-[a-z]+)*:`[^`\n]+`")


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


roles_script = load("docstring_roles", ROOT / "scripts" / "docstring_roles.py")
hook = load("docstring_markup_hook", ROOT / "docs" / "hooks" / "docstring_markup.py")


# ----------------------------------------------------------------------------- the checks


def docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string statement: module, class, function, attribute docstrings."""
    return [(node.lineno, node.value.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)]


def comments(source: str) -> list[tuple[int, str]]:
    return [(tok.start[0], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT]


def role_problems(source: str) -> list[str]:
    return [f"{line}: {m.group(0)}" for line, text in docstrings(source) + comments(source)
            for m in ROLE.finditer(text)]


def literal_block_problems(source: str) -> list[str]:
    """Lines ending in ``::`` followed (after blank lines) by a more indented line, outside
    fenced blocks."""
    out = []
    for line, text in docstrings(source):
        rows = text.split("\n")
        fenced = False
        for k, row in enumerate(rows):
            if re.match(r"\s*(```|~~~)", row):
                fenced = not fenced
            if fenced or not row.rstrip().endswith("::"):
                continue
            indent = len(row) - len(row.lstrip()) if k else 0
            nxt = next((r for r in rows[k + 1:] if r.strip()), None)
            if nxt is not None and k + 1 < len(rows) and not rows[k + 1].strip() \
                    and len(nxt) - len(nxt.lstrip()) > indent:
                out.append(f"{line + k}: {row.strip()}")
    return out


def sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def texts(pattern: re.Pattern):
    """(path, text) of the sources where ``pattern`` occurs at all (the rest need no parsing)."""
    for path in sources():
        text = path.read_text(encoding="utf-8")
        if pattern.search(text):
            yield path, text


def test_no_sphinx_roles_in_docstrings_or_comments():
    bad = [f"{path.relative_to(ROOT)}:{p}" for path, text in texts(ROLE)
           for p in role_problems(text)]
    assert not bad, ("Sphinx roles in docstrings/comments (write [`name`][full.path] or "
                     "`name`; scripts/docstring_roles.py converts them):\n" + "\n".join(bad))


def test_no_rest_literal_blocks_in_docstrings():
    bad = [f"{path.relative_to(ROOT)}:{p}" for path, text in texts(re.compile(r"::[ \t]*$", re.M))
           for p in literal_block_problems(text)]
    assert not bad, ("reST literal blocks in docstrings (use a fenced block; "
                     "scripts/docstring_roles.py converts them):\n" + "\n".join(bad))


PLANTED = '''"""Module: see :func:`analyze` and :py:class:`spectheory.law.Law`.

Usage::

    python -m spectheory

Fine: ``::`` inside code, and a line ending in::
that continues the paragraph.
"""

X = 1  # set by :func:`f`
Y = ":func:`not_a_docstring`"
'''


def test_checks_catch_planted_markup():
    assert role_problems(PLANTED) == ["1: :func:`analyze`", "1: :py:class:`spectheory.law.Law`",
                                      "11: :func:`f`"]
    assert literal_block_problems(PLANTED) == ["3: Usage::"]
    assert role_problems('"""[`analyze`][spectheory.engine.analysis.analyze] and `f`."""') == []


# ----------------------------------------------------------------------------- the converter

INVENTORY = {"spectheory": "py:module", "spectheory.engine.analysis": "py:module",
             "spectheory.engine.analysis.analyze": "py:function",
             "spectheory.lp.direct.direct_lp": "py:function",
             "spectheory.law.Law": "py:class",
             "spectheory.fake.Box": "py:class", "spectheory.fake.Box.open": "py:method"}

SOURCE = '''\
"""Doc: :func:`analyze`, :func:`lp.direct.direct_lp`, :mod:`spectheory.engine.analysis`,
:class:`~spectheory.law.Law`, :func:`spectheory.analyze`, :class:`fractions.Fraction`,
:func:`_private`, :py:func:`the engine <spectheory.engine.analysis.analyze>`.

Usage::

    python -m spectheory exact inst.json

* an item. For pytest::

      from spectheory import analyze

      def test():
          assert analyze
"""
from .engine.analysis import analyze

X = ":func:`analyze`"  # :func:`analyze`


class Box:
    """See :meth:`open`."""

    def open(self):
        """Opens :class:`Box`.

        ::

            {"json": [1, 2]} // not Python
        """
        return X
'''

EXPECTED = '''\
"""Doc: [`analyze`][spectheory.engine.analysis.analyze],
[`direct_lp`][spectheory.lp.direct.direct_lp],
[`spectheory.engine.analysis`][spectheory.engine.analysis], [`Law`][spectheory.law.Law],
[`analyze`][spectheory.engine.analysis.analyze], `fractions.Fraction`, `_private`,
[`the engine`][spectheory.engine.analysis.analyze].

Usage:

```bash
python -m spectheory exact inst.json
```

* an item. For pytest:

    ```python
    from spectheory import analyze

    def test():
        assert analyze
    ```
"""
from .engine.analysis import analyze

X = ":func:`analyze`"  # [`analyze`][spectheory.engine.analysis.analyze]


class Box:
    """See [`open`][spectheory.fake.Box.open]."""

    def open(self):
        """Opens [`Box`][spectheory.fake.Box].

        ```text
        {"json": [1, 2]} // not Python
        ```
        """
        return X
'''


_resolvers: dict = {}


def convert(source: str, inventory=INVENTORY) -> tuple[str, object]:
    key = tuple(sorted(inventory))
    if key not in _resolvers:  # one per inventory: it caches the modules it parsed
        _resolvers[key] = roles_script.Resolver(inventory)
    stats = roles_script.Stats()
    out = roles_script.convert_text(source, "spectheory.fake", False, _resolvers[key], stats)
    return out, stats


def test_converter_output():
    out, stats = convert(SOURCE)
    assert out == EXPECTED
    assert (stats.linked, stats.plain, stats.blocks) == (9, 2, 3)
    # only docstrings and comments changed: the code and the other strings are the same
    assert ast.dump(ast.parse(out).body[2]) == ast.dump(ast.parse(SOURCE).body[2])
    assert role_problems(out) == [] and literal_block_problems(out) == []


def test_converter_is_idempotent():
    once, _ = convert(SOURCE)
    twice, stats = convert(once)
    assert twice == once and (stats.linked, stats.plain, stats.blocks) == (0, 0, 0)


def test_undocumented_targets_stay_plain():
    """A target the site does not document is never linked (mkdocs --strict would fail)."""
    out, stats = convert(SOURCE, {k: v for k, v in INVENTORY.items()
                                  if k != "spectheory.engine.analysis.analyze"})
    assert "][spectheory.engine.analysis.analyze]" not in out
    assert out.startswith('"""Doc: `analyze`, ') and "# `analyze`\n" in out
    assert "`spectheory.analyze`" in out and "`the engine`" in out
    assert (stats.linked, stats.plain) == (5, 6)
    assert "[`direct_lp`][spectheory.lp.direct.direct_lp]" in out


def test_relative_and_method_targets_resolve_to_full_paths():
    source = ('"""See :func:`.exact.analyze`, :meth:`Box.open` and :class:`~.law.Law`; not\n'
              ':func:`.nowhere` nor :data:`fractions`."""\n\n\nclass Box:\n    pass\n')
    out, _ = convert(source)
    assert " ".join(out.split()).startswith(
        '"""See [`exact.analyze`][spectheory.engine.analysis.analyze], '
        '[`Box.open`][spectheory.fake.Box.open] and [`Law`][spectheory.law.Law]; not `nowhere` '
        'nor `fractions`."""')


def test_long_paragraphs_are_rewrapped_within_width():
    words = " ".join(["word"] * 20)
    source = f'"""Summary.\n\n{words} :func:`spectheory.engine.analysis.analyze` {words}\nend.\n"""\n'
    out, _ = convert(source)
    body = out.split("\n")
    assert max(len(line) for line in body) <= roles_script.WIDTH
    assert " ".join(out.split()) == " ".join(source.split()).replace(
        ":func:`spectheory.engine.analysis.analyze`", "[`analyze`][spectheory.engine.analysis.analyze]")


def test_rewrap_never_starts_a_line_with_markdown_block_syntax():
    """A re-wrapped line that began with ``#``, ``- `` or ``1. `` would turn prose into a heading
    or a list: whatever the break position, no such line is made."""
    starts = set()
    for n in range(40):
        source = (f'"""Summary.\n\n{"a" * n} :func:`spectheory.engine.analysis.analyze` fixed by #35798 - '
                  f'see 1. the list {"word " * 30}end.\n"""\n')
        out, _ = convert(source)
        lines = out.split("\n")[2:-2]
        starts.update(line.split()[0] for line in lines)
        assert max(len(line) for line in lines) <= roles_script.WIDTH
        assert " ".join(out.split()) == " ".join(source.split()).replace(
            ":func:`spectheory.engine.analysis.analyze`", "[`analyze`][spectheory.engine.analysis.analyze]")
    assert not starts & {"#35798", "-", "1."}, starts


def test_run_skips_a_file_edited_meanwhile(tmp_path, monkeypatch):
    path = tmp_path / "mod.py"
    path.write_text('"""See :func:`f`."""\n\n\ndef f():\n    pass\n', encoding="utf-8")
    other = tmp_path / "other.py"
    other.write_text('"""See :func:`g`."""\n\n\ndef g():\n    pass\n', encoding="utf-8")
    original = roles_script.convert_source
    calls = []

    def convert_and_edit(source, p, resolver, stats):
        calls.append(p)
        out = original(source, p, resolver, stats)
        if p == path and calls.count(p) == 2:  # the writing pass: someone edits the file
            path.write_text(source + "# edited\n", encoding="utf-8")
        return out

    monkeypatch.setattr(roles_script, "convert_source", convert_and_edit)
    changed, skipped, _ = roles_script.run([tmp_path], {"mod.f": "py:function"})
    assert skipped == [path] and path.read_text().endswith("# edited\n")
    assert ":func:`f`" in path.read_text()  # left for the next run
    assert changed == [other] and other.read_text().startswith('"""See `g`."""')
    assert not list(tmp_path.glob(".*.tmp"))


def test_run_checks_without_writing(tmp_path):
    path = tmp_path / "mod.py"
    text = '"""See :func:`f`."""\n\n\ndef f():\n    pass\n'
    path.write_text(text, encoding="utf-8")
    changed, skipped, _ = roles_script.run([tmp_path], {"mod.f": "py:function"}, check=True)
    assert changed == [path] and skipped == [] and path.read_text() == text
    roles_script.run([tmp_path], {"mod.f": "py:function"})
    assert path.read_text().startswith('"""See [`f`][mod.f]."""')


# ----------------------------------------------------------------------------- the hook


@pytest.mark.parametrize("html, found", [
    ('<p>See :func:<code>analyze</code>.</p>', ["':func:'"]),
    ('<p>See :py:class:`Law`.</p>', ["':py:class:'"]),
    ('<p>Usage::</p>\n<pre><code>python x.py</code></pre>', ["'::'"]),
    ('<ul><li>For pytest::</li></ul>', ["'::'"]),
    ('<p>See <a class="autorefs autorefs-internal" href="#x"><code>analyze</code></a>; the role '
     'syntax <code>:func:</code> in code, a C++ <code>std::vector</code>.</p>', []),
])
def test_hook_flags_raw_markup(html, found):
    problems = hook.problems(html)
    assert len(problems) == len(found) and all(f in p for f, p in zip(found, problems))


class _Records(logging.Handler):
    """The records a logger emits (the suite runs without pytest's logging plugin, whose
    per-test handling of every logger costs seconds; see pyproject.toml)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_hook_warns_so_that_strict_builds_fail():
    class Page:
        class file:
            src_uri = "api/exact.md"

    html = "<p>See :func:<code>analyze</code>.</p>"
    seen = _Records()
    hook.log.addHandler(seen)
    try:
        assert hook.on_page_content(html, Page, None, None) == html
    finally:
        hook.log.removeHandler(seen)
    assert [r.levelno for r in seen.records] == [logging.WARNING]
    text = "\n".join(r.getMessage() for r in seen.records)
    assert "api/exact.md" in text and ":func:" in text
    # a logger under "mkdocs", so mkdocs counts the warning and --strict aborts the build
    assert hook.log.name.startswith("mkdocs.")


def test_hook_is_registered():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    hooks = text[text.index("\nhooks:"):text.index("\nplugins:")]
    assert "docs/hooks/docstring_markup.py" in hooks
    assert re.search(r"^strict: true$", text, re.M)
