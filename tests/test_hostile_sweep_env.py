"""Sweep output folders, environment variables read at start-up, the allocator's arguments and
``audit --rows-file``: each bad input refused in one line (exit code 2 from the command line,
nothing written), each next to a valid neighbour that still works.

1. ``sweep --out ''`` and ``figures --out ''`` (an empty path is the current folder);
2. ``sweep --out`` naming the folder of a different sweep (its table would be overwritten);
3. ``SPECTHEORY_MALLOC`` and ``SPECTHEORY_BUFFER_POOL`` checked at start-up, as
   ``SPECTHEORY_THREADS`` and ``SPECTHEORY_NUMBA`` are;
4. ``keep_freed_memory`` arguments outside glibc ``mallopt``'s range;
5. ``audit --rows-file`` naming a folder.
"""

from __future__ import annotations

import pytest
import torch

from cli_helpers import refused, run
from spectheory.runtime.errors import SpectheoryError


# ----------------------------------------------------------------------------- 5. --rows-file


def test_rows_file_that_is_a_folder_is_named_a_folder(tmp_path, capsys):
    folder = tmp_path / "adir"
    folder.mkdir()
    refused(*run(["audit", "--rows-file", str(folder)], capsys), "is a folder, not a file",
            str(folder))
    refused(*run(["audit", "--rows-file", str(tmp_path / "nothing.pt")], capsys),
            "no such file")


def test_rows_file_that_is_a_file_still_loads(tmp_path):
    from spectheory.cli.audit import load_rows

    drafts = torch.tensor([[[0, 1]]])  # [B=1, K=1, L=2]
    q = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]]]])  # [B, K, L, V=2]
    p = torch.tensor([[[[0.5, 0.5], [1.0, 0.0], [0.75, 0.25]]]])  # [B, K, L+1, V]
    path = tmp_path / "rows.pt"
    torch.save({"drafts": drafts, "q": q, "p": p}, path)
    got_drafts, got_q, got_p, _ = load_rows(str(path))
    assert torch.equal(got_drafts, drafts) and torch.equal(got_q, q.double())
    assert torch.equal(got_p, p.double())


def test_audit_rows_named_twice_are_refused_as_dtypes_are(capsys):
    refused(*run(["audit", "--rows", "flat,flat"], capsys), "--rows names 'flat' twice")


def test_rows_files_that_are_empty_sparse_or_too_large_once_copied(tmp_path, capsys):
    """An empty file raised IndexError (its message had no first line), a sparse q
    NotImplementedError from aten, and an 8 KB file of expanded tensors ([100, 1, 8, 10^6],
    stride 0) was copied to float64 (6.4 GB) before any size guard."""
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    refused(*run(["audit", "--rows-file", str(empty)], capsys), "not a torch file of rows "
            "(EOFError)")
    # a JSON file: torch's advice on weights_only was cut at 120 characters, mid-word
    text = tmp_path / "rows.json"
    text.write_text('{"vocab_size": 2}')
    code, out, err = run(["audit", "--rows-file", str(text)], capsys)
    assert code == 2 and err == (f"spectheory: error: --rows-file {text}: not a torch file of "
                                 "rows (UnpicklingError: not a file torch.save wrote, or one "
                                 "holding objects other than tensors, dicts and lists)\n"), err
    drafts = torch.zeros(1, 1, 2, dtype=torch.long)
    q = torch.full((1, 1, 2, 2), 0.5)
    p = torch.full((1, 1, 3, 2), 0.5)
    sparse = tmp_path / "sparse.pt"
    torch.save({"drafts": drafts, "q": q.to_sparse(), "p": p}, sparse)
    refused(*run(["audit", "--rows-file", str(sparse)], capsys),
            "q is of layout torch.sparse_coo; rows are dense real tensors")
    big = tmp_path / "big.pt"
    V = 10**6
    row = torch.zeros(V)
    row[0] = 1.0
    torch.save({"drafts": torch.zeros(100, 1, 8, dtype=torch.long),
                "q": row.expand(100, 1, 8, V), "p": row.expand(100, 1, 9, V)}, big)
    assert big.stat().st_size < 10**7
    refused(*run(["audit", "--rows-file", str(big)], capsys),
            "rows of B = 100, K = 1, L = 8, V = 1,000,000 need about", "GiB limit")



# ----------------------------------------------------------------------------- 1. --out ''

SWEEP = """
[sweep]
name = "{name}"
time_limit = 30
[[instances]]
family = "random"
vocab = {vocab}
block = 1
seeds = {seeds}
[[verifiers]]
name = "{verifier}"
"""


def sweep_file(tmp_path, name="ok", vocab=2, seeds="[0]", verifier="token"):
    path = tmp_path / f"{name}.toml"
    path.write_text(SWEEP.format(name=name, vocab=vocab, seeds=seeds, verifier=verifier))
    return path


def snapshot(folder):
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_empty_sweep_out_is_refused_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """``--out ''`` wrote results.csv, cache/ and results.parquet into the current folder and
    printed "in /results.csv"."""
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep import load_config, run_sweep

    cfg = sweep_file(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    refused(*run(["sweep", str(cfg), "--out", "", "--no-progress"], capsys),
            "--out '' is empty")
    with pytest.raises(OptionError, match="--out '' is empty"):
        run_sweep(load_config(cfg), "", workers=1)
    assert list(work.iterdir()) == []
    code, out, _ = run(["sweep", str(cfg), "--out", "o", "--no-progress"], capsys)  # neighbour
    assert code == 0 and out == "1 row (1 ok) in o/results.csv\n"
    assert (work / "o" / "results.csv").is_file()


def test_a_sweep_folder_named_with_a_newline_is_summarised_on_one_line(tmp_path, capsys,
                                                                      monkeypatch):
    """``--out $'new\\nline'`` is a valid folder name; the summary printed it raw, over two lines.
    It is quoted with escapes now; a printable name is still shown as typed."""
    cfg = sweep_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["sweep", str(cfg), "--out", "new\nline", "--no-progress",
                          "--workers", "1"], capsys)
    assert code == 0, err
    assert "(1 worker)" in err  # "1 workers" before
    assert out == "1 row (1 ok) in 'new\\nline/results.csv'\n"
    assert (tmp_path / "new\nline" / "results.csv").is_file()


def test_empty_figures_out_is_refused_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """``figures --out ''`` wrote into the current folder."""
    from spectheory.cli import figures

    gallery = tmp_path / "gallery"
    gallery.mkdir()
    (gallery / "fig1_tiny.py").write_text(
        '''"""A tiny figure\n\nbody"""\nfrom pathlib import Path\n\n'''
        "def main(out, quick=False):\n"
        "    for ext in ('png', 'pdf'):\n"
        "        (Path(out) / ('fig1_tiny.' + ext)).write_text('drawn')\n"
        "    return {'value': 3}\n")
    monkeypatch.setattr(figures, "gallery_folder", lambda: gallery)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    refused(*run(["figures", "--out", "", "--no-progress"], capsys), "--out '' is empty")
    with pytest.raises(SpectheoryError, match="--out '' is empty"):
        figures.run("", quick=True, folder=gallery)
    assert list(work.iterdir()) == []
    # the neighbour: a named folder gets the figure
    code, out, err = run(["figures", "--out", "o", "--no-progress"], capsys)
    assert code == 0, err
    assert (work / "o" / "fig1_tiny.png").read_text() == "drawn"
    assert sorted(p.name for p in work.iterdir()) == ["o"]


# ----------------------------------------------------------------------------- 2. whose folder


def test_another_sweeps_folder_is_refused_and_left_as_it_was(tmp_path, capsys):
    """Sweep "ok2" run into sweep "ok"'s folder replaced ok's table without a word."""
    ok, ok2 = sweep_file(tmp_path), sweep_file(tmp_path, "ok2", vocab=3, seeds="[5]",
                                                verifier="block")
    out = tmp_path / "out"
    assert run(["sweep", str(ok), "--out", str(out), "--no-progress"], capsys)[0] == 0
    before = snapshot(out)
    assert "sweep.json" in before
    refused(*run(["sweep", str(ok2), "--out", str(out), "--no-progress"], capsys),
            f"--out {out} holds the results of sweep 'ok'", "not of sweep 'ok2'")
    assert snapshot(out) == before
    # the neighbours: ok2 into its own folder; ok again into its own (nothing recomputed)
    assert run(["sweep", str(ok2), "--out", str(tmp_path / "out2"), "--no-progress"],
               capsys)[0] == 0
    code, _, err = run(["sweep", str(ok), "--out", str(out)], capsys)
    assert code == 0 and "1 cached, 0 to run" in err
    assert snapshot(out)["results.csv"] == before["results.csv"]


def test_the_same_name_with_a_grown_grid_keeps_its_folder(tmp_path):
    """Extending a sweep (another seed) is the same sweep: the cached job is reused."""
    from spectheory.sweep import load_config, run_sweep

    out = tmp_path / "out"
    said = []
    first = run_sweep(load_config(sweep_file(tmp_path)), out, workers=1)
    rows = run_sweep(load_config(sweep_file(tmp_path, seeds="[0, 1]")), out, workers=1,
                     log=said.append)
    assert "2 jobs, 1 cached, 1 to run" in said[-1]
    assert rows[0] == first[0] and len(rows) == 2


def test_the_record_is_written_before_the_jobs_run(tmp_path, monkeypatch):
    """A sweep killed before its table was written still holds its folder (a resume of it
    works, another sweep is refused)."""
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep import load_config, run_sweep, runner

    out = tmp_path / "out"

    def killed(*args, **kwargs):
        assert (out / "sweep.json").is_file()
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(runner, "_local", killed)
        with pytest.raises(KeyboardInterrupt):
            run_sweep(load_config(sweep_file(tmp_path)), out, workers=1)
    assert not (out / "results.csv").exists()
    with pytest.raises(OptionError, match="holds the results of sweep 'ok'"):
        run_sweep(load_config(sweep_file(tmp_path, "other")), out, workers=1)
    (row,) = run_sweep(load_config(sweep_file(tmp_path)), out, workers=1)
    assert row["status"] == "ok"


def test_a_folder_without_a_record_is_judged_by_its_table(tmp_path):
    """A table written before records were kept: this sweep's when a row is one of its jobs."""
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep import load_config, run_sweep

    out = tmp_path / "out"
    run_sweep(load_config(sweep_file(tmp_path)), out, workers=1)
    (out / "sweep.json").unlink()
    before = snapshot(out)
    with pytest.raises(OptionError, match="the one row of its results.csv is not a job of "
                                          "sweep 'ok2'"):
        run_sweep(load_config(sweep_file(tmp_path, "ok2", vocab=3)), out, workers=1)
    assert snapshot(out) == before
    renamed = sweep_file(tmp_path, "renamed", seeds="[0, 1]")  # shares the seed-0 job
    assert len(run_sweep(load_config(renamed), out, workers=1)) == 2
    assert '"name": "renamed"' in (out / "sweep.json").read_text()


def _unnamed(tmp_path, stem, **kw):
    """A sweep file without ``[sweep] name`` (the default name)."""
    path = sweep_file(tmp_path, stem, **kw)
    path.write_text(path.read_text().replace(f'name = "{stem}"\n', "", 1))
    return path


def test_unnamed_sweeps_of_different_files_are_told_apart_by_their_jobs(tmp_path):
    """Every file without a name is the sweep "sweep": a second unnamed sweep run into the
    folder of the first was taken as its resume and its rows mixed into the table. Now the
    folder is the second's only if its table holds one of its jobs."""
    from spectheory.runtime.errors import OptionError
    from spectheory.sweep import load_config, run_sweep

    out = tmp_path / "out"
    first = _unnamed(tmp_path, "first")
    run_sweep(load_config(first), out, workers=1)
    before = snapshot(out)
    with pytest.raises(OptionError, match="holds the results of another unnamed sweep"):
        run_sweep(load_config(_unnamed(tmp_path, "second", vocab=3)), out, workers=1)
    assert snapshot(out) == before
    # the same file resumes; another file sharing a job (a grown grid, moved) extends it
    said = []
    run_sweep(load_config(first), out, workers=1, log=said.append)
    assert "1 jobs, 1 cached, 0 to run" in said[-1]
    grown = _unnamed(tmp_path, "grown", seeds="[0, 1]")
    assert len(run_sweep(load_config(grown), out, workers=1)) == 2


@pytest.mark.parametrize("what,text,words", [
    ("results.csv", "a,b\n1,2\n", "holds a results.csv that is not a sweep table"),
    ("sweep.json", "[1, 2]", "sweep.json there is not a sweep record"),
    ("sweep.json", "{not json", "sweep.json there is not a sweep record")])
def test_a_folder_of_something_else_is_refused(tmp_path, capsys, what, text, words):
    cfg = sweep_file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / what).write_text(text)
    before = snapshot(out)
    refused(*run(["sweep", str(cfg), "--out", str(out), "--no-progress"], capsys), words)
    assert snapshot(out) == before


# ----------------------------------------------------------------------------- 3. environment


@pytest.mark.parametrize("value", ["garbage", "defualt", "0", "off"])
def test_malloc_setting_garbage_refused_at_start_up(monkeypatch, capsys, value):
    """A typo in ``SPECTHEORY_MALLOC`` used to keep the tuned allocator without a word; it is
    refused before any command runs (``verifiers`` allocates nothing)."""
    from spectheory.runtime import allocator, limits
    from spectheory.runtime.errors import OptionError

    monkeypatch.setenv("SPECTHEORY_MALLOC", value)
    refused(*run(["verifiers"], capsys), "SPECTHEORY_MALLOC", repr(value), "default", "tuned")
    with pytest.raises(OptionError, match=f"SPECTHEORY_MALLOC={value!r} is not an allocator"):
        allocator.apply_default()
    with pytest.raises(OptionError, match="SPECTHEORY_MALLOC"):
        limits.check_environment()


@pytest.mark.parametrize("value,setting", [("default", "default"), (" DEFAULT ", "default"),
                                           ("tuned", "tuned"), ("", "tuned")])
def test_malloc_setting_values(monkeypatch, capsys, value, setting):
    from spectheory.runtime import allocator, limits

    monkeypatch.setenv("SPECTHEORY_MALLOC", value)
    assert limits.env_malloc() == setting
    if setting == "default":
        assert allocator.apply_default() is False  # the allocator is left alone
    code, out, err = run(["verifiers"], capsys)
    assert code == 0 and err == "" and "block" in out
    monkeypatch.delenv("SPECTHEORY_MALLOC")
    assert limits.env_malloc() == "tuned"


@pytest.mark.parametrize("value", ["-5", "lots", "1.5G", "4T"])
def test_buffer_pool_garbage_refused_at_start_up(monkeypatch, capsys, value):
    """A bad ``SPECTHEORY_BUFFER_POOL`` passed small runs and failed at the first allocation of
    64 MiB or more; now every command refuses it at start-up, ``verifiers`` included."""
    from spectheory.runtime import buffers, limits
    from spectheory.runtime.errors import OptionError

    monkeypatch.setattr(buffers, "_capacity", None)
    monkeypatch.setenv("SPECTHEORY_BUFFER_POOL", value)
    refused(*run(["verifiers"], capsys), f"SPECTHEORY_BUFFER_POOL={value!r} is not a size")
    with pytest.raises(OptionError, match="SPECTHEORY_BUFFER_POOL"):
        limits.check_environment()
    with pytest.raises(OptionError, match="SPECTHEORY_BUFFER_POOL"):
        buffers.capacity()
    monkeypatch.setattr(buffers, "_capacity", None)


@pytest.mark.parametrize("value,nbytes", [("0", 0), ("512M", 512 << 20), (" 4g ", 4 << 30),
                                          ("1000", 1000)])
def test_buffer_pool_values(monkeypatch, capsys, value, nbytes):
    from spectheory.runtime import buffers, limits

    monkeypatch.setattr(buffers, "_capacity", None)
    monkeypatch.setenv("SPECTHEORY_BUFFER_POOL", value)
    limits.check_environment()
    assert buffers.capacity() == nbytes
    code, out, err = run(["verifiers"], capsys)
    assert code == 0 and err == ""
    monkeypatch.setattr(buffers, "_capacity", None)


# ----------------------------------------------------------------------------- 4. mallopt


@pytest.mark.parametrize("args,words", [
    ((10**30,), "mmap_threshold=1000000000000000000000000000000 is out of range"),
    ((-1, -1), "mmap_threshold=-1 is out of range"),
    ((1 << 30, -1), "trim_threshold=-1 is out of range"),
    ((1 << 31,), "mmap_threshold=2147483648 is out of range [0, 2147483647]"),
    ((1 << 30, 10**5000), "trim_threshold=an integer of 16610 bits"),
    ((1.5e9,), "mmap_threshold=1500000000.0 is not a whole number"),
    ((True,), "mmap_threshold=True is not a whole number"),
    (("1G",), "mmap_threshold='1G' is not a whole number")])
def test_keep_freed_memory_refuses_values_mallopt_cannot_take(monkeypatch, args, words):
    """mallopt's value is a C int: 10**30 and -1 used to go to it unchecked (and True came back).
    Refused before the C library is touched (a loader that is never reached)."""
    import ctypes

    from spectheory.runtime import allocator
    from spectheory.runtime.errors import OptionError

    def never(*a, **k):
        raise AssertionError("mallopt reached")

    monkeypatch.setattr(ctypes, "CDLL", never)
    with pytest.raises(OptionError) as info:
        allocator.keep_freed_memory(*args)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_keep_freed_memory_takes_the_ends_of_the_range(monkeypatch):
    """0 and 2^31 - 1 (and numpy integers) reach mallopt unchanged, in its parameter order."""
    import ctypes

    import numpy as np

    from spectheory.runtime import allocator

    calls = []

    def mallopt(param, value):
        calls.append((param, value))
        return 1

    class Fake:
        def __init__(self, *a, **k):
            self.mallopt = mallopt  # a function: takes the argtypes/restype attributes

    monkeypatch.setattr(ctypes, "CDLL", Fake)
    monkeypatch.setattr(allocator.ctypes, "CDLL", Fake)
    assert allocator.keep_freed_memory(0, (1 << 31) - 1) is True
    assert allocator.keep_freed_memory(np.int64(1 << 30)) is True
    assert calls == [(-3, 0), (-1, (1 << 31) - 1), (-3, 1 << 30), (-1, (1 << 31) - 1)]


@pytest.mark.parametrize("value,ok", [("99999999999999G", False), ("16G", False),
                                      ("8G", True), ("4G", True)])
def test_buffer_pool_over_the_machines_memory_is_refused(monkeypatch, capsys, value, ok):
    """``99999999999999G`` (about 1e23 bytes) passed the digit limit and ran as no cap at all;
    a pool over the machine's memory is refused at start-up (here a machine of 8 GiB)."""
    from spectheory.runtime import buffers, limits
    from spectheory.runtime.errors import OptionError

    monkeypatch.setattr(buffers, "_capacity", None)
    monkeypatch.setattr(limits, "physical_memory", lambda: 8 << 30)
    monkeypatch.setenv("SPECTHEORY_BUFFER_POOL", value)
    if ok:
        limits.check_environment()
        assert buffers.capacity() == limits.parse_bytes(value)
    else:
        refused(*run(["verifiers"], capsys), f"SPECTHEORY_BUFFER_POOL={value!r} is over this "
                "machine's memory (8 GiB)")
        with pytest.raises(OptionError, match="over this machine's memory"):
            buffers.capacity()
    monkeypatch.setattr(buffers, "_capacity", None)


# ----------------------------------------------------------------------------- the sweep API

SMALL_SWEEP = ('[sweep]\nname = "t"\n[[instances]]\nfamily = "random"\nvocab = [2]\n'
               'block = [1]\n[[verifiers]]\nname = ["token"]\n')


def test_the_sweep_api_names_a_bad_argument_and_writes_nothing(tmp_path):
    """``run_sweep(cfg, out, log=5)`` failed after ``out/cache`` and ``sweep.json`` were
    written; TOML text for ``cfg``, a hand-made SweepConfig, ``only="abc"`` (read letter by
    letter) and ``load_config(None)`` failed inside with errors naming no argument;
    ``retry_failed="yes"`` was taken; a folder given to ``load_config`` was read as TOML text."""
    from spectheory.sweep import load_config, run_sweep
    from spectheory.sweep.config import SweepConfig

    cfg = load_config(SMALL_SWEEP)
    out = tmp_path / "out"
    for args, kw, words in (
            ((cfg,), {"log": 5}, "run_sweep: log takes a function of one line of text (or "
                                 "None), not int"),
            ((cfg,), {"only": "abc"}, "run_sweep: only takes a list of job keys (strings), not "
                                      "str"),
            ((cfg,), {"retry_failed": "yes"}, "run_sweep: retry_failed must be True or False, "
                                              "not 'yes'"),
            ((SMALL_SWEEP,), {}, "run_sweep takes a SweepConfig (load_config(text or path)), "
                                 "not str"),
            ((SweepConfig(instances=[{"family": "random"}], verifiers=[{"name": "token"}]),),
             {}, "run_sweep: the SweepConfig's tables are not those load_config makes "
                 "(KeyError: 'knobs'); build it with load_config")):
        with pytest.raises(SpectheoryError) as exc:
            run_sweep(*args, out, **kw)
        assert str(exc.value) == words
        assert not out.exists()
    for value in (None, b"[sweep]", {"sweep": {}}):
        with pytest.raises(SpectheoryError) as exc:
            load_config(value)
        assert str(exc.value) == (f"load_config takes TOML text or a path, not "
                                  f"{type(value).__name__}")
    (tmp_path / "adir").mkdir()
    with pytest.raises(SpectheoryError, match="it is a folder"):
        load_config(str(tmp_path / "adir"))
    lines = []
    rows = run_sweep(cfg, out, workers=1, log=lines.append)  # the valid neighbour
    assert [r["status"] for r in rows] == ["ok"] and lines
