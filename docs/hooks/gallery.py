"""mkdocs hook: the figure gallery page.

Each figure is a script ``figures/figN_<name>.py`` whose module docstring says what it shows
(first line: the title, a trailing full stop dropped; the rest: the description, in Markdown)
and an image ``figures/figN_<name>.png``. The hook puts the images into the site under
``gallery/`` and replaces the marker ``<!-- gallery -->`` in ``docs/gallery.md`` by one section
per figure, in figure order: title, image, description and the script's source (read, never
run).

Where a figure has an image but no script, its title and description come from the matching
``## figN_<name>: title`` section of ``figures/INDEX.md`` if that file exists, else the title is
the file name. A figure with a script and no image yet is listed with a note instead of a picture.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.structure.files import File

MARKER = "<!-- gallery -->"
PAGE = "gallery.md"
PATTERN = re.compile(r"^fig(\d+)_(\w+)$")


@dataclass
class Figure:
    number: int
    stem: str
    title: str
    description: str
    image: Path | None
    script: Path | None


def _figures_dir(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent / "figures"


def _index_sections(folder: Path) -> dict[str, tuple[str, str]]:
    """``stem -> (title, body)`` from ``figures/INDEX.md`` (absent file: empty)."""
    index = folder / "INDEX.md"
    if not index.is_file():
        return {}
    sections: dict[str, tuple[str, str]] = {}
    stem = None
    for line in index.read_text(encoding="utf-8").splitlines():
        head = re.match(r"^## (fig\d+_\w+):\s*(.*)$", line)
        if head:
            stem = head.group(1)
            sections[stem] = (head.group(2).strip(), "")
        elif line.startswith("#"):
            stem = None
        elif stem is not None:
            title, body = sections[stem]
            sections[stem] = (title, body + line + "\n")
    return {k: (t, b.strip()) for k, (t, b) in sections.items()}


def _from_script(path: Path) -> tuple[str, str]:
    """(title, description) from a script's module docstring, without running it."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError:
        doc = ""
    first, _, rest = doc.strip().partition("\n")
    return first.strip().removesuffix("."), rest.strip()


def collect(folder: Path) -> list[Figure]:
    """Every figure in ``folder``, scripts first, images next, in figure order."""
    stems: dict[str, dict[str, Path]] = {}
    if folder.is_dir():
        for path in folder.iterdir():
            if PATTERN.match(path.stem) and path.suffix in (".py", ".png"):
                stems.setdefault(path.stem, {})[path.suffix] = path
    index = _index_sections(folder)
    figures = []
    for stem, paths in stems.items():
        number = int(PATTERN.match(stem).group(1))
        script, image = paths.get(".py"), paths.get(".png")
        title, description = _from_script(script) if script else index.get(stem, ("", ""))
        title = title or stem.split("_", 1)[1].replace("_", " ")
        figures.append(Figure(number, stem, title, description, image, script))
    return sorted(figures, key=lambda f: (f.number, f.stem))


def render(figures: list[Figure]) -> str:
    if not figures:
        return "*No figures in `figures/` yet.*\n"
    out = []
    for fig in figures:
        out.append(f"## {fig.number}. {fig.title} {{ #{fig.stem} }}\n")
        if fig.image is not None:
            out.append(f"![{fig.title}](gallery/{fig.image.name})\n")
        else:
            out.append(f"*No image yet: `figures/{fig.stem}.png` is drawn by the script below.*\n")
        if fig.description:
            out.append(fig.description + "\n")
        if fig.script is not None:
            source = fig.script.read_text(encoding="utf-8").rstrip("\n")
            indented = "\n".join("    " + line if line else "" for line in source.splitlines())
            out.append(f'??? example "Source: figures/{fig.script.name}"\n\n'
                       f"    ```python\n{indented}\n    ```\n")
    return "\n".join(out)


def on_files(files, config):
    for fig in collect(_figures_dir(config)):
        if fig.image is not None:
            files.append(File.generated(config, f"gallery/{fig.image.name}",
                                        abs_src_path=str(fig.image)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE or MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(collect(_figures_dir(config))))
