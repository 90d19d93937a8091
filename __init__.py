"""Repository root of spectheory (not the package: that is ``spectheory/`` below this file).

Python imports this file as ``spectheory`` when it runs from the folder *above* a clone named
``spectheory/`` (the current folder comes first on ``sys.path``). Without this file the clone
folder would be taken as an empty namespace package, shadowing even an installed copy, and
``spectheory.analyze`` would be missing. Here the real package ``spectheory/`` is loaded in its
place, so ``import spectheory`` gives the same module from anywhere. Under any other name (a
test runner collecting the repository root) this file does nothing.
"""

if __name__ == "spectheory":
    import importlib.util as _util
    import sys as _sys
    from pathlib import Path as _Path

    _package = _Path(__file__).resolve().parent / "spectheory"
    _spec = _util.spec_from_file_location(
        __name__, _package / "__init__.py", submodule_search_locations=[str(_package)])
    if _spec is None or _spec.loader is None:  # pragma: no cover - package folder missing
        raise ImportError(f"spectheory: the package folder {_package} is missing from this clone")
    _module = _util.module_from_spec(_spec)
    _sys.modules[__name__] = _module  # the import system returns what sys.modules holds
    _spec.loader.exec_module(_module)
