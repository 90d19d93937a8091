"""mkdocs hook: no page of the site shows raw Sphinx markup.

mkdocstrings renders docstrings as Markdown, so a Sphinx role left in a docstring (``:func:`f` ``,
``:class:``, ``:mod:``, ...) reaches the page as raw text (``:func:<code>f</code>`` in the HTML),
and a reST literal block (``Usage::`` and an indented block) runs into the prose (a paragraph
ending in ``::``). Docstrings use Markdown cross-references instead (``[`f`][spectheory.x.f]``,
fully qualified) and fenced code blocks; ``scripts/docstring_roles.py`` rewrites old markup.

Each page's HTML is checked after rendering; every find is a warning naming the page, the markup
and its context, so ``mkdocs build --strict`` (the test command, and ``strict: true`` in
mkdocs.yml) fails.
"""

from __future__ import annotations

import html as html_lib
import logging
import re

log = logging.getLogger("mkdocs.hooks.docstring_markup")

#: Sphinx roles (any of them, also with the ``py:`` domain) as they reach the HTML: the role name
#: right before the code span Markdown made of the backticks, or before a raw backtick.
ROLES = ("func|class|mod|meth|attr|data|obj|exc|const|type|ref|doc|term|math|any|envvar|option|"
         "program|file|samp|kbd|abbr|pep|rfc|cite|eq|numref|download|paramref|property|function|"
         "method|attribute|module")
RAW_ROLE = re.compile(rf"(?<!\w):(?:py:)?(?:{ROLES}):(?=<code\b|`)")
#: A paragraph (or list item, definition, cell) that ends in a reST literal-block marker.
LITERAL_MARKER = re.compile(r"::\s*</(?:p|li|dd|td)>")
TAG = re.compile(r"<[^>]+>")


def _context(html: str, start: int, end: int) -> str:
    text = TAG.sub("", html[max(0, start - 80):end + 60])
    return " ".join(html_lib.unescape(text).split())[:140]


def problems(html: str) -> list[str]:
    """One line per raw role or literal-block marker in a page's HTML."""
    out = []
    for m in RAW_ROLE.finditer(html):
        out.append(f"raw Sphinx role {m.group(0)!r} in: ...{_context(html, m.start(), m.end())}...")
    for m in LITERAL_MARKER.finditer(html):
        out.append(f"reST literal-block marker '::' in: "
                   f"...{_context(html, m.start(), m.end())}")
    return out


def on_page_content(html, page, config, files):
    for problem in problems(html):
        log.warning("%s: %s (write a Markdown cross-reference [`name`][full.path] or a fenced "
                    "block; scripts/docstring_roles.py converts old markup)",
                    page.file.src_uri, problem)
    return html
