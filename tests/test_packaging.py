"""Packaging: the version everywhere it is stated, ``python -m spectheory``, the import from the
folder above a clone named ``spectheory/``, and a core that works without the optional extras."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import spectheory
from spectheory.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _python(code_or_args, cwd, extra_path=()):
    """Run the test's interpreter in ``cwd`` with only ``extra_path`` on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in extra_path)
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else list(code_or_args)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"spectheory {spectheory.__version__}"


def test_version_matches_citation_and_changelog():
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^version: (\S+)$", cff, re.M).group(1) == spectheory.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{spectheory.__version__}]" in changelog


def test_py_typed_is_package_data():
    tomllib = pytest.importorskip("tomllib")
    assert (ROOT / "spectheory" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["spectheory"]


def test_import_from_the_folder_above_a_clone_named_spectheory(tmp_path):
    """Python puts the current folder first on sys.path; a clone root named ``spectheory/``
    there must not shadow the package as an empty namespace package."""
    (tmp_path / "spectheory").symlink_to(ROOT, target_is_directory=True)
    res = _python("import spectheory, spectheory.engine.analysis as e; "
                  "print(spectheory.__file__); print(e.__file__); print(spectheory.analyze)",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pkg, exact, analyze = res.stdout.splitlines()
    assert Path(pkg).resolve() == ROOT / "spectheory" / "__init__.py"
    assert Path(exact).resolve() == ROOT / "spectheory" / "engine" / "analysis.py"
    assert "function analyze" in analyze
    res = _python(["-m", "spectheory", "--version"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"spectheory {spectheory.__version__}"


def test_core_needs_no_optional_extra(tmp_path):
    """The theory core and the LPs (HiGHS route) run with the optional packages unimportable:
    matplotlib ([figures]), cvxpy ([cvxpy]), transformers/gguf/accelerate ([models]),
    mkdocs ([docs]); networkx is not a dependency at all."""
    blocked = ["matplotlib", "cvxpy", "transformers", "gguf", "accelerate", "mkdocs", "networkx"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import spectheory as st\nfrom spectheory import lp\n"
        "from spectheory.cli import build_parser\n"
        "from spectheory.cli.report import toy_instance\n"
        "inst = toy_instance(exact=True)\n"
        "print(st.analyze(inst, 'block').block_efficiency)\n"
        "print(st.analyze(inst, 'gbv', paths=2).block_efficiency)\n"
        "print(lp.node_budget_lp(inst, exact=True).optimum)\n"
        "build_parser()\n"
    )
    res = _python(code, cwd=tmp_path, extra_path=[ROOT])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["20/9", "212/81", "20/9"]


def test_wheel_installs_one_top_level_package_and_runs_the_gallery(tmp_path):
    """The wheel holds one import name, ``spectheory``: the repository's lp/, toy_models/,
    gpu_validation/ and figures/ install as spectheory.lp, spectheory.toy_models,
    spectheory.gpu_validation and spectheory.gallery (pyproject's package-dir), so nothing
    generic lands in site-packages, and ``spectheory figures`` runs from the installed copy."""
    import zipfile

    import shutil

    pytest.importorskip("setuptools")
    source = tmp_path / "source"  # building writes build/ beside pyproject.toml: not in ROOT
    skip = shutil.ignore_patterns("__pycache__", "*.png", "*.pdf", "*.egg-info", "build")
    for name in ("spectheory", "lp", "toy_models", "gpu_validation", "figures"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                          "--no-build-isolation", "-w", str(wheels), str(source)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if res.returncode != 0 and "No module named pip" in res.stderr:
        pytest.skip("pip is not available to build a wheel")
    assert res.returncode == 0, res.stderr[-2000:]
    (wheel,) = wheels.glob("spectheory-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"spectheory"}, top
    for module in ("lp/direct.py", "toy_models/data/SOURCE.md", "gpu_validation/cli.py",
                   "gallery/fig3_tau_pmf.py", "gallery/_common.py", "gallery/figures.json"):
        assert f"spectheory/{module}" in names, module
    # every package of the source tree is in the wheel (an editable install would hide a
    # missing one: its finder serves sub-packages from the checkout)
    installed = {"spectheory": "spectheory", "lp": "spectheory/lp",
                 "toy_models": "spectheory/toy_models",
                 "gpu_validation": "spectheory/gpu_validation", "figures": "spectheory/gallery"}
    for folder, prefix in installed.items():
        for init in (source / folder).rglob("__init__.py"):
            rel = init.relative_to(source / folder).as_posix()
            assert f"{prefix}/{rel}" in names, f"{folder}/{rel} is not in the wheel"
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    run = tmp_path / "run"
    run.mkdir()
    res = _python(["-c", "import spectheory.lp as m, spectheory.gallery as g; "
                   "print(m.__file__); print(g.__path__[0])"], cwd=run, extra_path=[target])
    assert res.returncode == 0, res.stderr
    assert all(Path(line).resolve().is_relative_to(target.resolve())
               for line in res.stdout.splitlines())
    res = _python(["-m", "spectheory", "figures", "--quick", "--only", "fig3", "--no-progress"],
                  cwd=run, extra_path=[target])
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run / "out" / "figures" / "fig3_tau_pmf.png").is_file()  # the default --out
    assert not list((target / "spectheory" / "gallery").glob("*.png"))  # never written into
