"""mkdocs hook: document the packages as they install.

The repository's lp/, toy_models/, gpu_validation/ and figures/ folders install as
``spectheory.lp``, ``spectheory.toy_models``, ``spectheory.gpu_validation`` and
``spectheory.gallery`` (pyproject.toml's package-dir). mkdocstrings reads sources from folders, so
this hook lays the sources out that way in a temporary folder (the Python files only) and points
the Python handler's ``paths`` at it; the folder is removed when the build ends.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

#: source folder -> its place in the installed package
LAYOUT = {"spectheory": "spectheory", "lp": "spectheory/lp", "toy_models": "spectheory/toy_models",
          "gpu_validation": "spectheory/gpu_validation", "figures": "spectheory/gallery"}

_stage: list[str] = []


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config):
    root = Path(config["config_file_path"]).resolve().parent
    stage = Path(tempfile.mkdtemp(prefix="spectheory-api-"))
    _stage.append(str(stage))
    for source, target in LAYOUT.items():
        shutil.copytree(root / source, stage / target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.png", "*.pdf", "*.json",
                                                      "data"))
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(stage)]
    return config


def on_shutdown():
    while _stage:
        shutil.rmtree(_stage.pop(), ignore_errors=True)
