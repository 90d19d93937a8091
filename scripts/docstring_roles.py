"""Rewrite Sphinx markup in docstrings and comments into the Markdown that mkdocstrings renders.

The API pages (``docs/api/*.md``) render docstrings with mkdocstrings-python, which reads
Markdown: a Sphinx role such as ``:func:`spectheory.check_lossless` `` stays raw text, and a reST
literal block (a line ending in ``::`` followed by an indented block) runs into the prose. This
script rewrites, in every ``.py`` file under the package folders:

* a role ``:func:`target` `` (any role, with or without the ``py:`` domain, a ``~`` prefix or an
  explicit ``title <target>``) into an mkdocs-autorefs cross-reference
  ``[`title`][full.path]`` when the target resolves to an object the API pages document (an
  entry of the site's ``objects.inv``), else into plain backticks ``` `target` ``` (so that
  ``mkdocs build --strict`` never meets a broken reference). Identifiers are always fully
  qualified: relative names (``analyze``, ``.data.parse_datasets``, ``Law.validate``) are resolved
  in the module's own namespace (its definitions and imports, followed statically), and public
  re-exports (``spectheory.analyze``) by importing the documented modules; names of the folders
  that install under ``spectheory`` (``lp.direct``) are written with their installed name
  (``spectheory.lp.direct``);
* a reST literal block (``Usage::``, ``text ::`` or a lone ``::`` followed by an indented block)
  into a fenced block: ```` ```python ```` when the block parses as Python, ```` ```bash ```` when
  it is a shell command line, ```` ```text ```` otherwise.

A paragraph that a link made wider than ``WIDTH`` (100) columns is re-wrapped: only whitespace
at line ends moves, and never so that a line starts with Markdown block syntax (``#``, ``- ``,
``1. ``, ...); a run of comment lines likewise.

Only docstrings (every string statement: module, class, function and attribute docstrings) and
comments change; the script checks that each rewritten file compiles to the same syntax tree
(docstrings aside). Each file is read, converted and written at once, and skipped (and named) if
its content changed since it was read. A second run changes nothing.

Usage (from the repository root):

```bash
.venv/bin/python scripts/docstring_roles.py               # rewrite the package folders
.venv/bin/python scripts/docstring_roles.py --check --diff # change nothing; exit 1 if it would
.venv/bin/python scripts/docstring_roles.py --inventory site/objects.inv spectheory/law.py
```

Without ``--inventory`` the documentation is built once into a temporary folder (``mkdocs build
--no-strict``, a few seconds) for its inventory of documented objects.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import inspect
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import tokenize
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Folders whose ``.py`` files are rewritten.
FOLDERS = ("spectheory", "lp", "toy_models", "gpu_validation", "figures", "benchmarks")
#: Source folder -> installed package (pyproject.toml's ``[tool.setuptools.package-dir]``).
PACKAGE_DIRS = {"spectheory": "spectheory", "lp": "spectheory.lp",
                "toy_models": "spectheory.toy_models",
                "gpu_validation": "spectheory.gpu_validation", "figures": "spectheory.gallery"}

#: A Sphinx role: ``:role:`text` `` or ``:domain:role:`text` ``.
ROLE = re.compile(r"(?<![\w`:]):(?:(?P<domain>[a-z]+):)?(?P<role>[a-z]+(?:-[a-z]+)*):"
                  r"`(?P<text>[^`\n]+)`(?!`)")
#: Roles that name a Python object (the others become plain backticks).
OBJECT_ROLES = {"func", "class", "mod", "meth", "attr", "data", "obj", "exc", "const", "type",
                "property", "function", "method", "attribute", "module", "any"}
#: First words of a shell command line (a literal block of these becomes ```bash).
SHELL_WORDS = {"python", "python3", "pip", "pip3", "git", "spectheory", "pytest", "bash", "sh",
               "mkdocs", "cd", "export", "env", "uv", "conda", "make", "curl", "ollama",
               "llama-cli", "huggingface-cli", "hf", "docker"}
FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^(\s*)(?:[*+-]|\d+[.)])\s+")


# ----------------------------------------------------------------------------- modules


def module_name(path: Path) -> tuple[str, bool]:
    """(dotted name as installed, is a package ``__init__``) of a source file of the repository.

    ``lp/direct.py`` -> ``spectheory.lp.direct``; ``benchmarks/bench_exact.py`` ->
    ``benchmarks.bench_exact`` (not installed; only its own names resolve)."""
    try:
        rel = path.resolve().relative_to(ROOT).with_suffix("")
    except ValueError:  # a file outside the repository: a top-level module of its own
        return path.stem, False
    parts = list(rel.parts)
    head = PACKAGE_DIRS.get(parts[0], parts[0])
    parts = head.split(".") + parts[1:]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def module_file(name: str) -> Path | None:
    """The source file of an installed module name, if it is in the repository."""
    parts = name.split(".")
    for folder, package in sorted(PACKAGE_DIRS.items(), key=lambda kv: -len(kv[1])):
        pk = package.split(".")
        if parts[:len(pk)] == pk:
            base = ROOT / folder / Path(*parts[len(pk):]) if parts[len(pk):] else ROOT / folder
            for cand in (base.with_suffix(".py") if parts[len(pk):] else None,
                         base / "__init__.py"):
                if cand is not None and cand.is_file():
                    return cand
            return None
    if parts[0] == "benchmarks":
        cand = ROOT.joinpath(*parts).with_suffix(".py")
        return cand if cand.is_file() else None
    return None


def installed_name(text: str) -> str:
    """``lp.direct`` -> ``spectheory.lp.direct`` (a folder that installs under spectheory)."""
    head, dot, rest = text.partition(".")
    if head in PACKAGE_DIRS and head != "spectheory":
        return PACKAGE_DIRS[head] + dot + rest
    return text


@dataclass
class Namespace:
    """Top-level names of a module: name -> full dotted path (its own definitions, its imports);
    and the members of its classes."""

    module: str
    names: dict[str, str] = field(default_factory=dict)
    classes: dict[str, set[str]] = field(default_factory=dict)


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if level:
        base = base if is_package else base[:-1]
        base = base[:len(base) - (level - 1)] if level > 1 else base
        return ".".join(base + ([target] if target else []))
    return target or ""


def namespace_of(tree: ast.Module, module: str, is_package: bool) -> Namespace:
    ns = Namespace(module)

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ns.names.setdefault(node.name, f"{module}.{node.name}")
            elif isinstance(node, ast.ClassDef):
                ns.names.setdefault(node.name, f"{module}.{node.name}")
                members = set()
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        members.add(sub.name)
                    elif isinstance(sub, ast.Assign):
                        members.update(t.id for t in sub.targets if isinstance(t, ast.Name))
                    elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                        members.add(sub.target.id)
                ns.classes[node.name] = members
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            ns.names.setdefault(n.id, f"{module}.{n.id}")
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ns.names.setdefault(node.target.id, f"{module}.{node.target.id}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        ns.names.setdefault(a.asname, installed_name(a.name))
                    else:
                        head = a.name.split(".")[0]
                        ns.names.setdefault(head, installed_name(head))
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, is_package, node.level, node.module)
                source = installed_name(source)
                for a in node.names:
                    if a.name != "*":
                        ns.names.setdefault(a.asname or a.name, f"{source}.{a.name}")
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)

    visit(tree.body)
    # imports inside functions (deferred imports) name objects too, after the module's own names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.names[0].name != "*":
            source = installed_name(_absolute(module, is_package, node.level, node.module))
            for a in node.names:
                ns.names.setdefault(a.asname or a.name, f"{source}.{a.name}")
    return ns


# ----------------------------------------------------------------------------- inventory


def read_inventory(path: Path) -> dict[str, str]:
    """Object name -> role (``py:function``, ``py:module``, ...) of a Sphinx inventory (version
    2), as mkdocstrings writes ``objects.inv``."""
    data = path.read_bytes()
    header, _, body = data.partition(b"# The remainder of this file is compressed using zlib.\n")
    if not header.startswith(b"# Sphinx inventory version 2"):
        raise SystemExit(f"docstring_roles: error: {path} is not a Sphinx inventory (version 2)")
    names = {}
    for line in zlib.decompress(body).decode("utf-8").splitlines():
        fields = line.split(" ")
        if len(fields) >= 2:
            names[fields[0]] = fields[1]
    return names


def build_inventory() -> dict[str, str]:
    """Build the documentation into a temporary folder and read its ``objects.inv``."""
    with tempfile.TemporaryDirectory(prefix="docstring-roles-site-") as site:
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--no-strict", "--quiet",
                               "--site-dir", site], cwd=ROOT, env=env, capture_output=True,
                              text=True)
        inv = Path(site) / "objects.inv"
        if proc.returncode != 0 or not inv.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"docstring_roles: error: mkdocs build failed ({last}); pass "
                             "--inventory FILE")
        return read_inventory(inv)


# ----------------------------------------------------------------------------- resolution


class Resolver:
    """Resolve role targets to documented, fully qualified identifiers."""

    def __init__(self, inventory: dict[str, str]):
        self.inventory = inventory
        self.documented_modules = {n for n, role in inventory.items() if role == "py:module"}
        self._ns: dict[str, Namespace | None] = {}
        self._cache: dict[tuple, str | None] = {}

    # -- namespaces
    def namespace(self, module: str) -> Namespace | None:
        if module not in self._ns:
            path = module_file(module)
            ns = None
            if path is not None:
                try:
                    tree = ast.parse(path.read_text(encoding="utf-8"))
                except (OSError, SyntaxError, UnicodeDecodeError):
                    tree = None
                if tree is not None:
                    ns = namespace_of(tree, module, path.name == "__init__.py")
            self._ns[module] = ns
        return self._ns[module]

    def set_namespace(self, ns: Namespace) -> None:
        """Use ``ns`` for its module (the text being converted, not the file as last read)."""
        if self._ns.get(ns.module) != ns:
            self._cache.clear()  # resolutions through the old namespace may differ
        self._ns[ns.module] = ns

    def split_module(self, path: str) -> tuple[str, list[str]]:
        """(longest prefix that is a module of the repository, the remaining parts)."""
        parts = path.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if module_file(head) is not None or head in self._ns:
                return head, parts[i:]
        return "", parts

    # -- canonical forms
    def _static_forms(self, path: str, depth: int = 0) -> list[str]:
        """``path`` and the paths it names through the imports of the modules it passes."""
        forms = [path]
        if depth > 8:
            return forms
        module, rest = self.split_module(path)
        if not module or not rest:
            return forms
        ns = self.namespace(module)
        if ns is None or rest[0] not in ns.names:
            return forms
        target = ns.names[rest[0]]
        full = ".".join([target] + rest[1:])
        if full != path:
            forms += self._static_forms(full, depth + 1)
        return forms

    def _runtime_form(self, path: str) -> str | None:
        """Canonical path of ``path`` by importing it (documented modules only)."""
        parts = path.split(".")
        obj, i = None, 0
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head != "spectheory" and head not in self.documented_modules:
                continue
            try:
                obj = importlib.import_module(head)
            except ModuleNotFoundError as exc:
                if exc.name == head:  # an alias such as `module.Bk`: try the shorter prefix
                    continue
                return None  # an optional dependency missing: static resolution only
            except Exception:  # noqa: BLE001 - a module that fails to import: static only
                return None
            break
        if obj is None:
            return None
        owner = ".".join(parts[:i])
        for part in parts[i:]:
            try:
                obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else \
                    getattr(obj, part)
            except AttributeError:
                return None
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
            if inspect.ismodule(obj):
                owner = obj.__name__
            elif (inspect.isclass(obj) or inspect.isfunction(obj)) \
                    and "<" not in getattr(obj, "__qualname__", "<"):
                owner = f"{obj.__module__}.{obj.__qualname__}"
            else:
                owner = f"{owner}.{part}"
        return owner

    def documented(self, path: str) -> str | None:
        """The documented identifier ``path`` stands for, or None."""
        if path in self._cache:
            return self._cache[path]
        found = None
        forms = self._static_forms(path)
        for form in forms:
            if form in self.inventory:
                found = form
                break
        if found is None:
            runtime = self._runtime_form(forms[-1]) or self._runtime_form(path)
            if runtime is not None:
                for form in self._static_forms(runtime):
                    if form in self.inventory:
                        found = form
                        break
        if found is not None:
            # prefer the canonical (primary) anchor when it is documented too
            for form in reversed(self._static_forms(found)):
                if form in self.inventory:
                    found = form
                    break
        self._cache[path] = found
        return found

    # -- a role
    def candidates(self, target: str, ns: Namespace, is_package: bool,
                   cls: str | None) -> list[str]:
        """Full paths ``target`` may name from inside module ``ns`` (and class ``cls``)."""
        if target.startswith("."):
            level = len(target) - len(target.lstrip("."))
            rest = target[level:]
            out = [_absolute(ns.module, is_package, level, rest)]
            # Sphinx's meaning of a leading dot: the suffix of a documented name, if one only
            named = {self.documented(n) for n in self.inventory if n.endswith("." + rest)}
            return out + (list(named) if len(named) == 1 else [])
        target = installed_name(target)
        head, _, tail = target.partition(".")
        out = []
        if cls is not None:
            out.append(f"{ns.module}.{cls}.{target}")
        if head in ns.names:
            out.append(ns.names[head] + ("." + tail if tail else ""))
        out.append(f"{ns.module}.{target}")
        out.append(target)
        return out

    def unique_suffix(self, target: str, ns: Namespace) -> str | None:
        """The one documented object of the module's own package (its top two levels, e.g.
        ``spectheory.lp``) whose name ends in ``.target``, if there is exactly one."""
        package = ".".join(ns.module.split(".")[:2])
        found = set()
        for name in self.inventory:
            if name.endswith("." + target) and name.startswith(package + "."):
                found.add(self.documented(name))
        return found.pop() if len(found) == 1 else None

    def resolve(self, target: str, ns: Namespace, is_package: bool,
                cls: str | None) -> str | None:
        key = (target, ns.module, cls)
        if key not in self._cache:
            found = None
            for cand in self.candidates(target, ns, is_package, cls):
                found = self.documented(cand)
                if found is not None:
                    break
            if found is None and not target.startswith("."):
                found = self.unique_suffix(installed_name(target), ns)
            self._cache[key] = found
        return self._cache[key]


# ----------------------------------------------------------------------------- roles


@dataclass
class Stats:
    linked: int = 0
    plain: int = 0
    blocks: int = 0
    unresolved: list[str] = field(default_factory=list)


def role_replacement(m: re.Match, resolver: Resolver, ns: Namespace, is_package: bool,
                     cls: str | None, stats: Stats, where: str) -> str:
    role, text = m.group("role"), m.group("text").strip()
    if m.group("domain") not in (None, "py") or role not in OBJECT_ROLES:
        stats.plain += 1
        return f"`{text}`"
    title = None
    explicit = re.fullmatch(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", text, re.S)
    if explicit and explicit.group("title"):
        title, target = explicit.group("title"), explicit.group("target").strip()
    else:
        target = text
    short = target.startswith("~")
    target = target.lstrip("~!").removesuffix("()")
    found = resolver.resolve(target, ns, is_package, cls)
    written = target if target.startswith(".") else installed_name(target)
    if title is None:
        if short:
            title = written.rsplit(".", 1)[-1]
        elif found is not None and "." in written and role not in ("mod", "module") \
                and not written.startswith(".") and written.split(".")[0] == \
                found.split(".")[0]:
            # a fully qualified name: show it without its module, as Sphinx's ~ would
            module, rest = resolver.split_module(written)
            title = ".".join(rest) if module and rest else written.rsplit(".", 1)[-1]
        else:
            title = written.lstrip(".")
    if found is None:
        stats.plain += 1
        stats.unresolved.append(f"{where}: :{role}:`{text}`")
        return f"`{title}`"
    stats.linked += 1
    return f"[`{title}`][{found}]"


def convert_roles(text: str, resolver: Resolver, ns: Namespace, is_package: bool,
                  cls: str | None, stats: Stats, where: str) -> str:
    return ROLE.sub(lambda m: role_replacement(m, resolver, ns, is_package, cls, stats, where),
                    text)


# ----------------------------------------------------------------------------- reflow

#: Widest line the source keeps to (a paragraph that a link made wider is re-wrapped).
WIDTH = 100
#: A line that would start a Markdown block (or a numpy section) if a re-wrap put it first.
BLOCK_START = re.compile(r"^(?:[*+-](?:\s|$)|\d+[.)](?:\s|$)|#|>|\||`{3}|~{3}|-{3,}|={3,}|\.\.\s|"
                         r"\[[^\]]*\]:)")
#: A numpy ``name : type`` line (never joined with its neighbours).
NUMPY_ITEM = re.compile(r"^\s*\*{0,2}\w[\w, *]*\s:(?:\s|$)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def _plain(line: str) -> bool:
    """A line of running text (not blank, not a fence, table, underline or numpy item; a line
    ending in a literal-block marker ``::`` is running text that ends its paragraph)."""
    s = line.strip()
    return bool(s) and not FENCE.match(line) and not re.fullmatch(r"-{3,}|={3,}", s) \
        and not s.startswith(("|", ">>>", "..")) and s != "::" \
        and not NUMPY_ITEM.match(line) and not line.endswith(("  ", "\\"))


def reflow(lines: list[str], changed: set[int], base: int, first_extra: int, last_extra: int,
           width: int = WIDTH) -> list[str]:
    """Re-wrap each paragraph of a docstring that holds a line made wider than ``width`` by the
    rewrite (``changed``). Line 0 follows the opening quotes (``first_extra`` columns) and counts
    as indented by ``base``; the last line is followed by the closing quotes (``last_extra``).
    Only whitespace at line ends moves; a paragraph whose re-wrap would start a line with Markdown
    block syntax is left as it is."""
    fenced, inside = set(), False
    for k, line in enumerate(lines):
        if FENCE.match(line):
            inside = not inside
            fenced.add(k)
        elif inside:
            fenced.add(k)

    def ind(k: int) -> int:
        return base if k == 0 else _indent(lines[k])

    def cols(k: int) -> int:
        return len(lines[k]) + (first_extra if k == 0 else 0) + \
            (last_extra if k == len(lines) - 1 else 0)

    out = list(lines)
    done: set[int] = set()
    for t in sorted(changed):
        if t in done or t in fenced or cols(t) <= width or not _plain(lines[t]):
            continue
        item = LIST_ITEM.match(lines[t]) if t else None
        cont = len(item.group(0)) if item else ind(t)
        s = t
        while not item and s > 0 and (s - 1) not in fenced and _plain(lines[s - 1]) \
                and not lines[s - 1].rstrip().endswith("::"):
            prev = LIST_ITEM.match(lines[s - 1]) if s - 1 else None
            if prev and len(prev.group(0)) == cont:
                s -= 1
                break
            if prev or ind(s - 1) != cont:
                break
            s -= 1
        e = t + 1
        while e < len(lines) and e not in fenced and _plain(lines[e]) \
                and not LIST_ITEM.match(lines[e]) and ind(e) == cont \
                and not lines[e - 1].rstrip().endswith("::"):
            e += 1
        first = LIST_ITEM.match(lines[s]) if s else None
        lead = first.group(0) if first else (" " * first_extra if s == 0 else " " * cont)
        words = " ".join(lines[k].strip() if not (k == s and first)
                         else lines[k][len(lead):].strip() for k in range(s, e))
        # spaces inside code spans do not break
        words = CODE_SPAN.sub(lambda m: m.group(0).replace(" ", "\0"), words)
        tail = "\1" * (last_extra if e == len(lines) else 0)
        for narrower in range(12):  # a few narrower widths if a line would start a block
            wrapped = textwrap.wrap(words + tail, width=width - narrower, initial_indent=lead,
                                    subsequent_indent=" " * cont, break_long_words=False,
                                    break_on_hyphens=False)
            wrapped = [w.replace("\0", " ").replace("\1", "") for w in wrapped]
            if not any(BLOCK_START.match(w.strip()) or NUMPY_ITEM.match(w)
                       or w.strip().startswith("=") for w in wrapped[1:]):
                break
        else:
            continue
        if s == 0 and not first:
            wrapped[0] = wrapped[0][first_extra:]
        out[s:e] = wrapped + [None] * (e - s - len(wrapped)) if len(wrapped) <= e - s \
            else wrapped[:e - s - 1] + ["\n".join(wrapped[e - s - 1:])]
        done.update(range(s, e))
    return [x for line in out if line is not None for x in line.split("\n")]


# ----------------------------------------------------------------------------- literal blocks


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def fence_language(lines: list[str]) -> str:
    code = textwrap.dedent("\n".join(lines))
    first = code.lstrip().split(None, 1)[0] if code.strip() else ""
    if code.lstrip().startswith("$ ") or first in SHELL_WORDS or first.startswith(".venv/") \
            or re.match(r"^[A-Z_][A-Z0-9_]*=\S*$", first):
        return "bash"
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"


def convert_literal_blocks(lines: list[str], base: int, stats: Stats) -> list[str]:
    """Rewrite reST literal blocks of a docstring's lines (the first line starts after the
    quotes and counts as indented by ``base``)."""

    def ind(k: int) -> int:
        return base if k == 0 else _indent(lines[k])

    out: list[str] = []
    i, in_fence = 0, False
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            in_fence = not in_fence
        stripped = line.rstrip()
        if in_fence or not stripped.endswith("::"):
            out.append(line)
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j == i + 1 or j >= len(lines) or _indent(lines[j]) <= ind(i):
            out.append(line)
            i += 1
            continue
        end = j
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > ind(i)):
            end += 1
        while not lines[end - 1].strip():
            end -= 1
        block = lines[j:end]
        # where the fence goes: the paragraph's indentation, inside a list item its content
        p = i
        while p > 0 and lines[p - 1].strip():
            p -= 1
        item = LIST_ITEM.match(lines[p] if p else " " * base + lines[0])
        pad = " " * ((len(item.group(1)) + 4) if item else ind(p))
        prose = stripped[:-2]
        if stripped.strip() == "::":
            text_line = None
        elif prose.endswith((" ", "\t")):
            text_line = prose.rstrip()
        else:
            text_line = prose + ":"
        if text_line is not None:
            out.append(text_line)
            out.append("")
        elif out and out[-1].strip():
            out.append("")
        body = textwrap.dedent("\n".join(block)).split("\n")
        out.append(pad + "```" + fence_language(block))
        out.extend((pad + b) if b.strip() else "" for b in body)
        out.append(pad + "```")
        stats.blocks += 1
        i = end
    return out


# ----------------------------------------------------------------------------- files


STRING_PREFIX = re.compile(r"^(?P<prefix>[rRuU]{0,2})(?P<quote>\"\"\"|'''|\"|')")


def docstring_nodes(tree: ast.Module):
    """(string node, enclosing class name or None) for every string statement."""

    def walk(node, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant) \
                    and isinstance(child.value.value, str):
                yield child.value, cls
            if isinstance(child, ast.ClassDef):
                yield from walk(child, child.name if cls is None else f"{cls}.{child.name}")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, None if cls is None else cls)
            else:
                yield from walk(child, cls)

    yield from walk(tree, None)


def _masked_dump(tree: ast.Module) -> str:
    for node, _ in docstring_nodes(tree):
        node.value = ""
    return ast.dump(tree)


def comment_edits(comments: dict, lines: list[str], offset) -> list[tuple[int, int, str]]:
    """Edits for the converted comments; a run of full-line comments (same column, same ``#`` or
    ``#:`` marker) that a link made wider than ``WIDTH`` is re-wrapped as one."""

    def marker(row: int) -> str | None:
        tok, _ = comments.get(row, (None, None))
        if tok is None or lines[row - 1][:tok.start[1]].strip():
            return None  # no comment, or one after code
        m = re.match(r"#:?\s", tok.string + " ")
        return m.group(0).rstrip() if m and tok.string.strip() not in ("#", "#:") else None

    edits, done = [], set()
    for row in sorted(comments):
        tok, new = comments[row]
        if new == tok.string or row in done:
            continue
        mark = marker(row)
        if mark is None or tok.start[1] + len(new) <= WIDTH:
            edits.append((offset(*tok.start), offset(*tok.end), new))
            continue
        col = tok.start[1]

        def same(r: int) -> bool:
            return r in comments and marker(r) == mark and comments[r][0].start[1] == col

        first, last = row, row
        while same(first - 1):
            first -= 1
        while same(last + 1):
            last += 1
        words = " ".join(comments[r][1][len(mark):].strip() for r in range(first, last + 1))
        words = CODE_SPAN.sub(lambda m: m.group(0).replace(" ", "\0"), words)
        pad = " " * col + mark + " "
        wrapped = [w.replace("\0", " ") for w in textwrap.wrap(
            words, width=WIDTH, initial_indent=pad, subsequent_indent=pad,
            break_long_words=False, break_on_hyphens=False)]
        newline = "\r\n" if lines[row - 1].endswith("\r\n") else "\n"
        start, end = comments[first][0].start, comments[last][0].end
        edits.append((offset(*start), offset(*end), newline.join(wrapped)[col:]))
        done.update(range(first, last + 1))
    return edits


def convert_source(source: str, path: Path, resolver: Resolver, stats: Stats) -> str:
    """The converted text of one file (unchanged when there is nothing to convert)."""
    module, is_package = module_name(path)
    try:
        rel = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        rel = str(path)
    return convert_text(source, module, is_package, resolver, stats, rel)


def convert_text(source: str, module: str, is_package: bool, resolver: Resolver, stats: Stats,
                 rel: str = "<source>") -> str:
    """The converted text of the source of module ``module`` (unchanged when there is nothing to
    convert). Raises ``SyntaxError`` for a source that does not parse."""
    tree = ast.parse(source)
    ns = namespace_of(tree, module, is_package)
    resolver.set_namespace(ns)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + col

    docs = {}
    for node, cls in docstring_nodes(tree):
        docs[(node.lineno, node.col_offset)] = (node, cls)
    edits: list[tuple[int, int, str]] = []
    # classes by line, for comments inside a class body
    class_spans = [(n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                   if isinstance(n, ast.ClassDef)]

    def class_at(row: int) -> str | None:
        inner = [c for c in class_spans if c[0] <= row <= c[1]]
        return max(inner, key=lambda c: c[0])[2] if inner else None

    comments: dict[int, tuple[tokenize.TokenInfo, str]] = {}  # row -> (token, new text)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            new = tok.string
            if ROLE.search(tok.string):
                new = convert_roles(tok.string, resolver, ns, is_package, class_at(tok.start[0]),
                                    stats, f"{rel}:{tok.start[0]}")
            comments[tok.start[0]] = (tok, new)
        elif tok.type == tokenize.STRING:
            # ast columns are UTF-8 byte offsets; tokenize's are characters
            row, col = tok.start
            bcol = len(lines[row - 1][:col].encode("utf-8"))
            if (row, bcol) not in docs:
                continue
            node, cls = docs[(row, bcol)]
            m = STRING_PREFIX.match(tok.string)
            if m is None or "b" in m.group("prefix").lower():
                continue
            q = m.group("quote")
            head, inner = tok.string[:m.end()], tok.string[m.end():len(tok.string) - len(q)]
            new = convert_roles(inner, resolver, ns, is_package, cls, stats, f"{rel}:{row}")
            if len(q) == 3 and (new != inner or "::" in new):
                newline = "\r\n" if lines[row - 1].endswith("\r\n") else "\n"
                old_lines = [x.rstrip("\r") for x in inner.split("\n")]
                doc_lines = [x.rstrip("\r") for x in new.split("\n")]
                base = min((_indent(x) for x in doc_lines[1:] if x.strip()), default=col)
                changed = {k for k, (a, b) in enumerate(zip(old_lines, doc_lines)) if a != b}
                if changed:
                    doc_lines = reflow(doc_lines, changed, base, col + len(head), len(q))
                new = newline.join(convert_literal_blocks(doc_lines, base, stats))
            if new != inner:
                edits.append((offset(*tok.start), offset(*tok.end), head + new + q))
    edits += comment_edits(comments, lines, offset)
    if not edits:
        return source
    out = source
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    after = ast.parse(out)
    if _masked_dump(after) != _masked_dump(ast.parse(source)):
        raise RuntimeError(f"{rel}: the rewrite changed code, not only docstrings")
    return out


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def python_files(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted(x for x in p.rglob("*.py") if "__pycache__" not in x.parts)
        elif p.suffix == ".py" and p.is_file():
            out.append(p)
    return out


def has_markup(source: str) -> bool:
    """Whether a file may hold anything to convert (a role, or a `::`)."""
    return bool(ROLE.search(source)) or "::" in source


def run(paths: list[Path], inventory: dict[str, str], check: bool = False,
        out=sys.stdout, diff: bool = False) -> tuple[list[Path], list[Path], Stats]:
    """Convert ``paths``; returns (changed files, files skipped because they changed while
    being converted, statistics). ``check``: write nothing (``diff``: print the changes)."""
    resolver = Resolver(inventory)
    files = python_files(paths)
    stats = Stats()
    # first pass: resolve every target (imports and namespaces), holding no file's text
    warm = Stats()
    for path in files:
        try:
            source = path.read_bytes().decode("utf-8")
            if has_markup(source):
                convert_source(source, path, resolver, warm)
        except (SyntaxError, UnicodeDecodeError, OSError, RuntimeError):
            continue
    changed, skipped = [], []
    for path in files:
        try:
            raw = path.read_bytes()
            source = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not has_markup(source):
            continue
        try:
            new = convert_source(source, path, resolver, stats)
        except SyntaxError:
            print(f"docstring_roles: skipped {_rel(path)} (does not parse)", file=out)
            continue
        except RuntimeError as exc:
            print(f"docstring_roles: skipped {exc}", file=out)
            continue
        if new == source:
            continue
        if check:
            changed.append(path)
            if diff:
                name = _rel(path)
                out.writelines(difflib.unified_diff(source.splitlines(True),
                                                    new.splitlines(True), name, name))
            continue
        if path.read_bytes() != raw:  # edited meanwhile: leave it for the next run
            skipped.append(path)
            continue
        tmp = path.with_name(f".{path.name}.docstring-roles.tmp")
        tmp.write_bytes(new.encode("utf-8"))
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        changed.append(path)
    return changed, skipped, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", help="files or folders (default: the package folders)")
    ap.add_argument("--inventory", metavar="FILE",
                    help="objects.inv of a built site (default: build the docs once)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file "
                    "would change")
    ap.add_argument("--diff", action="store_true", help="with --check: print the changes")
    ap.add_argument("--verbose", action="store_true", help="list the roles left as backticks")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.paths] or [ROOT / f for f in FOLDERS]
    inventory = read_inventory(Path(args.inventory)) if args.inventory else build_inventory()
    changed, skipped, stats = run(paths, inventory, check=args.check, diff=args.diff)
    verb = "would change" if args.check else "changed"
    print(f"{len(changed)} file(s) {verb}; {stats.linked} role(s) linked, {stats.plain} as plain "
          f"backticks, {stats.blocks} literal block(s) fenced")
    for p in changed:
        print(f"  {verb}: {_rel(p)}")
    for p in skipped:
        print(f"  skipped (edited while converting; run again): {_rel(p)}")
    if args.verbose:
        for u in stats.unresolved:
            print(f"  backticks: {u}")
    return 1 if (args.check and changed) or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
