"""Sweeps (`spectheory sweep`): the grid, the values (equal to the public API's), the cache and
resuming, failures as rows (exceptions, exits, time and memory limits, crashes), strict files,
the Ray executor agreeing with the local one, and the standard plot."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
import time
from fractions import Fraction

import pytest

import spectheory as st
from spectheory.cli import main
from spectheory.runtime.errors import OptionError
from spectheory.lp import direct_lp, node_budget_lp
from spectheory.inputs.random_instances import random_instance
from spectheory.runtime.partial import kept_clauses
from spectheory.sweep import example_config, expand, load_config, run_sweep
from spectheory.sweep import runner
from spectheory.sweep.runner import RUN_COLUMNS


def _table(out):
    with open(out / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    rows = run_sweep(load_config(example_config()), out, workers=2)
    return out, rows


def test_example_has_at_least_eight_rows_with_every_input_and_output(example_run):
    out, rows = example_run
    assert len(rows) == len(expand(load_config(example_config()))) == 12
    table = _table(out)
    assert [r["job"] for r in table] == [r["job"] for r in rows]
    assert all(r["status"] == "ok" for r in table), [r["error"] for r in table]
    assert set(table[0]) >= {"family", "vocab", "block", "seed", "knobs", "name", "paths",
                             "drafting", "block_efficiency", "tv_to_target", "seconds",
                             "peak_rss_mb", "command"}
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_table(out / "results.parquet").num_rows == 12


def test_values_equal_the_public_api(example_run):
    _, rows = example_run
    for r in rows:
        inst = random_instance(r["vocab"], r["block"], r["seed"], alpha=1.0)
        if r["kind"] == "verifier":
            res = st.analyze(inst, r["name"], paths=r["paths"])
            assert float(r["block_efficiency"]) == float(res.block_efficiency)
            pmf = json.loads(r["tau_pmf"])
            assert pmf == [float(v) for v in res.tau_pmf]
            assert float(r["tv_to_target"]) < 1e-12  # lossless verifiers
        elif r["name"] == "direct":
            assert float(r["block_efficiency"]) == pytest.approx(
                direct_lp(inst, r["paths"]).optimum, abs=1e-9)
        else:
            assert float(r["block_efficiency"]) == pytest.approx(
                node_budget_lp(inst).optimum, abs=1e-9)


def test_no_verifier_beats_the_optimum_of_its_instance(example_run):
    """A real property of the table: every lossless verifier's E[tau+1] is at most the direct
    LP's optimum at the same K on the same instance (the plot's gap column is >= 0)."""
    from spectheory.sweep.plot import series

    _, rows = example_run
    table = [{k: str(v) for k, v in r.items()} for r in rows]
    _, gaps = series(table, "paths")
    assert gaps and all(g >= -1e-9 for d in gaps.values() for g in d.values())


def test_exact_sweep_gives_rationals_equal_to_the_exact_engine(tmp_path):
    cfg = load_config(textwrap.dedent("""
        [sweep]
        exact = true
        [[instances]]
        family = "random"
        vocab = 2
        block = 2
        seeds = [3]
        denominator = 12
        [[verifiers]]
        name = ["block"]
        [[optima]]
        problem = "node-budget"
    """))
    rows = run_sweep(cfg, tmp_path / "out", workers=1)
    inst = random_instance(2, 2, 3, denominator=12)
    want = st.analyze(inst, "block", exact=True).block_efficiency
    assert isinstance(want, Fraction) and Fraction(rows[0]["value_exact"]) == want
    assert Fraction(rows[1]["value_exact"]) == node_budget_lp(inst, exact=True).optimum
    assert "--exact" in rows[0]["command"] and "--denominator 12" in rows[0]["command"]


def test_reproducing_command_gives_the_row(example_run, tmp_path, capsys, monkeypatch):
    _, rows = example_run
    row = next(r for r in rows if r["name"] == "block" and r["vocab"] == 3)
    make, run = row["command"].split(" && ")
    assert main(make.split()[1:-2]) == 0  # drop 'spectheory' and '> inst.json'
    (tmp_path / "inst.json").write_text(capsys.readouterr().out)
    monkeypatch.chdir(tmp_path)
    assert main(run.split()[1:] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block_efficiency"] == row["block_efficiency"]


# ----------------------------------------------------------------------------- cache


def test_rerun_and_extended_grid_compute_only_what_is_missing(tmp_path, monkeypatch):
    text = example_config()
    out = tmp_path / "out"
    started = []
    real = runner._Guarded.__init__

    def counting(self, jobs, work=None):  # a child's jobs (one each, without batching)
        started.extend(job.key() for job in jobs)
        real(self, jobs, work)

    monkeypatch.setattr(runner._Guarded, "__init__", counting)
    first = run_sweep(load_config(text), out, workers=2)
    assert len(started) == 12
    again = run_sweep(load_config(text), out, workers=2)
    assert len(started) == 12  # nothing recomputed
    assert [{k: v for k, v in r.items()} for r in again] == first
    extended = text.replace("seeds = [0]", "seeds = [0, 1]")
    rows = run_sweep(load_config(extended), out, workers=2)
    assert len(rows) == 24 and len(started) == 24  # only the new seed's 12 jobs ran


def test_killed_sweep_resumes_from_its_cache(tmp_path, monkeypatch):
    module = tmp_path / "slowver.py"
    module.write_text(textwrap.dedent("""
        import glob, os, time
        from spectheory.verifiers.block import block_verification

        def slow(drafts, q, p):
            time.sleep(0.3)
            hold = os.environ.get("SLOWVER_HOLD")  # the killed run: no job past the second
            if hold and len(glob.glob(os.path.join(hold, "*.json"))) >= 2:  # ends, whatever
                time.sleep(60)  # the test's own pauses (it polls for them)
            return block_verification(drafts, q, p)
    """))
    cfg = tmp_path / "slow.toml"
    cfg.write_text(textwrap.dedent("""
        [[instances]]
        family = "random"
        vocab = 2
        block = 2
        seeds = [0, 1, 2, 3, 4, 5]
        [[verifiers]]
        name = "slowver:slow"
    """))
    out = tmp_path / "out"
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path),
           "SLOWVER_HOLD": str(out / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "spectheory", "sweep", str(cfg), "--out",
                             str(out), "--workers", "1", "--no-progress"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(list((out / "cache").glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.terminate()  # SIGTERM: the command's own handler, its one line
    err = proc.communicate(timeout=30)[1]
    done = len(list((out / "cache").glob("*.json")))
    assert done == 2 and proc.returncode == 143
    # the line says what stays (the finished jobs' cache), not only that nothing is half-written
    assert err.strip().splitlines()[-1] == (
        "spectheory: terminated (SIGTERM); nothing half-written was left; the finished jobs stay "
        f"in {out / 'cache'}, and the same command resumes from them"), err
    monkeypatch.syspath_prepend(str(tmp_path))
    said = []
    run_sweep(load_config(cfg), out, workers=2, log=said.append)
    assert f"{done} cached, {6 - done} to run" in said[0]
    assert len(_table(out)) == 6 and all(r["status"] == "ok" for r in _table(out))
    assert kept_clauses() == []  # a later SIGTERM in this process does not name the cache


# ----------------------------------------------------------------------------- torch


NUMPY_SWEEP = """
[[instances]]
family = "random"
vocab = 2
block = 2
seeds = [0]
[[verifiers]]
name = ["token", "block"]
[[verifiers]]
name = "gbv"
paths = 2
[[measures]]
name = "tv"
"""


def test_a_sweep_of_numpy_jobs_runs_without_torch(tmp_path):
    """Float single-path and analytic verifiers and measures compute on numpy: neither the
    parent nor its forked children import torch (a fresh interpreter; each child reports)."""
    from spectheory.sweep.jobs import needs_torch

    assert not any(needs_torch(j) for j in expand(load_config(NUMPY_SWEEP)))
    script = textwrap.dedent("""
        import json, os, sys
        from spectheory.sweep import load_config, run_sweep, runner
        compute = runner.compute
        def reporting(job):  # in the child, before the job computes
            with open(os.path.join(sys.argv[2], f"{job.name}-{job.paths}"), "w") as fh:
                fh.write(json.dumps("torch" in sys.modules))
            return compute(job)
        runner.compute = reporting
        rows = run_sweep(load_config(sys.argv[1]), os.path.join(sys.argv[2], "out"), workers=1)
        print(json.dumps([[r["status"] for r in rows], "torch" in sys.modules]))
    """)
    cfg = tmp_path / "numpy.toml"
    cfg.write_text(NUMPY_SWEEP)
    res = subprocess.run([sys.executable, "-c", script, str(cfg), str(tmp_path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    statuses, parent = json.loads(res.stdout)
    assert statuses == ["ok"] * 4 and parent is False
    reports = {f.name: json.loads(f.read_text()) for f in tmp_path.iterdir() if f.is_file()
               and f.suffix != ".toml"}
    assert reports == {"token-1": False, "block-1": False, "gbv-2": False, "tv-1": False}


def test_a_sweep_that_may_need_torch_warms_it_in_the_parent(tmp_path, monkeypatch):
    """A float LP (checked against verifiers' float laws) or a float multi-path verifier off
    the analytic route may compute on torch: the parent loads it before forking."""
    from spectheory.runtime import _lazy
    from spectheory.sweep.jobs import needs_torch, warm_up

    loads = []

    class Recorder:
        def zeros(self, *shape):
            loads.append(shape)

    monkeypatch.setattr(_lazy, "torch", Recorder())
    numpy_jobs = expand(load_config(NUMPY_SWEEP))
    warm_up(numpy_jobs)
    assert loads == []
    for extra in ('[[optima]]\nproblem = "direct"\n',
                  '[[verifiers]]\nname = "specinfer"\npaths = 2\n'):
        jobs = expand(load_config(NUMPY_SWEEP + extra))
        assert sorted(needs_torch(j) for j in jobs) == [False] * 4 + [True]
        warm_up(jobs)
        assert loads == [(1,)]
        loads.clear()
    rows = run_sweep(load_config(NUMPY_SWEEP + '[[optima]]\nproblem = "direct"\n'),
                     tmp_path / "out", workers=1)
    assert loads == [(1,)] and all(r["status"] == "ok" for r in rows)


# ----------------------------------------------------------------------------- failures

#: A user verifier module whose law functions fail in each way a job can (the jobs run them;
#: a family failing so is refused when the file is read, test_hostile_inputs).
FAILING_LAWS = """
    import os, sys, time
    from spectheory.verifiers.block import block_verification

    def ok(drafts, q, p):
        return block_verification(drafts, q, p)

    def raise_(drafts, q, p):
        raise RuntimeError("boom")

    def exit0(drafts, q, p):
        sys.exit(0)

    def hang(drafts, q, p):
        time.sleep(60)

    def hog(drafts, q, p):
        blocks = [bytearray(50 * 2**20) for _ in range(40)]
        time.sleep(60)

    def osexit(drafts, q, p):
        os._exit(7)

    def die(drafts, q, p):
        os.kill(os.getpid(), 9)
"""


def _failing_sweep(tmp_path, names, time_limit):
    cfg = load_config(textwrap.dedent(f"""
        [sweep]
        time_limit = {time_limit}
        memory_limit_mb = 600
        [[instances]]
        family = "random"
        vocab = 2
        block = 2
        [[verifiers]]
        name = {json.dumps([f"badver:{n}" for n in names])}
    """))
    out = tmp_path / f"out-{time_limit}"
    rows = run_sweep(cfg, out, workers=2)
    assert len(_table(out)) == len(names)
    return {r["name"].split(":")[1]: (r["status"], r["error"]) for r in rows}


def test_failing_jobs_are_rows_not_crashes(tmp_path, monkeypatch):
    (tmp_path / "badver.py").write_text(textwrap.dedent(FAILING_LAWS))
    monkeypatch.syspath_prepend(str(tmp_path))
    # (8 s: on a loaded machine the hog's start-up alone took over 3 s and it timed out before
    # reaching its memory limit; the hang runs in a sweep of its own with a short limit, so that
    # this one ends when its last job does, not 8 s after the hang started)
    status = _failing_sweep(tmp_path, ["ok", "raise_", "exit0", "hog", "osexit", "die"], 8)
    assert status["ok"] == ("ok", "")
    assert status["raise_"][0] == "failed" and "RuntimeError: boom" in status["raise_"][1]
    assert status["exit0"][0] == "failed" and "sys.exit(0)" in status["exit0"][1]
    assert status["hog"][0] == "memory" and "memory limit of 600 MB" in status["hog"][1]
    # os._exit in user code is refused by the call guard (one named line), a real crash is a
    # crashed row
    assert status["osexit"][0] == "failed" and "os._exit(7)" in status["osexit"][1]
    assert status["die"][0] == "crashed", status["die"]
    status = _failing_sweep(tmp_path, ["hang"], 2)  # (a job beside it that had to end within
    # 2 s, start-up included, can miss on a loaded machine; the jobs after a hang are checked
    # in test_sweep_grids.py::test_a_stopped_or_crashed_job_ends_its_batch_and_the_rest_run_again)
    assert status["hang"][0] == "timeout" and "time limit of 2 s" in status["hang"][1]


def test_bad_verifier_name_is_refused_when_the_file_is_read():
    with pytest.raises(OptionError, match="unknown verifier 'gbw'; did you mean 'gbv'"):
        load_config(example_config().replace('name = ["gbv"]', 'name = ["gbw"]'))


@pytest.mark.parametrize("text, message", [
    ('[sweep]\nnmae = "x"\n', "unknown key 'nmae' in [sweep]; did you mean 'name'?"),
    ('[[instance]]\n', "unknown key 'instance' in the sweep file; did you mean 'instances'?"),
    ('[[instances]]\nfamily="random"\nvocab=2\nblock=2\n[[verifiers]]\nnmae="token"\n',
     "unknown key 'nmae' in [[verifiers]] #1; did you mean 'name'?"),
    ('[[instances]]\nfamily="random"\nvocab=1\nblock=2\n[[verifiers]]\nname="token"\n',
     "vocab must be integers in [2, 10000]"),
    ('[[instances]]\nfamily="random"\nvocab=2\nblock=2\n[[optima]]\nproblem="drect"\n',
     "did you mean 'direct'?"),
    ('[[instances]]\nfamily="random"\nvocab=[2]\nblock=2\nseeds=' + str(list(range(400)))
     + '\n[[verifiers]]\nname=' + json.dumps([f"v{i}" for i in range(300)]) + '\n',
     "expands to 120,000 jobs"),
    ('[sweep\n', "is not valid TOML"),
])
def test_bad_sweep_files_are_one_line(text, message):
    with pytest.raises(OptionError) as exc:
        load_config(text)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_cli_bad_file_and_example(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\ntime_limt = 3\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'time_limit'" in err
    assert not (tmp_path / "o").exists()  # nothing written for a refused file
    assert main(["sweep", "--example"]) == 0
    assert load_config(capsys.readouterr().out).name == "example"
    good = tmp_path / "good.toml"
    good.write_text(example_config())
    assert main(["sweep", str(good), "--workers", "100000", "--out", str(tmp_path / "o")]) == 2
    top = 4 * (os.cpu_count() or 1)
    assert capsys.readouterr().err == (f"spectheory: error: --workers 100000 must be an integer in "
                                       f"[1, {top}] (4 x this machine's {top // 4} cores)\n")


# ----------------------------------------------------------------------------- ray, plot


def test_ray_executor_gives_the_local_table(example_run, tmp_path, ray_cluster):
    out, _ = example_run
    rows = run_sweep(load_config(example_config()), tmp_path / "ray", executor="ray",
                     workers=2)
    local = _table(out)
    remote = _table(tmp_path / "ray")
    assert len(rows) == len(local) == len(remote) == 12
    for a, b in zip(local, remote):
        assert {k: v for k, v in a.items() if k not in RUN_COLUMNS} == \
            {k: v for k, v in b.items() if k not in RUN_COLUMNS}


def test_plot_draws_the_standard_views(example_run, capsys):
    pytest.importorskip("matplotlib")
    out, _ = example_run
    assert main(["sweep", "plot", str(out)]) == 0
    assert (out / "sweep.png").stat().st_size > 10_000
    assert main(["sweep", "plot", str(out / "missing")]) == 2
    capsys.readouterr()
    # an image name matplotlib cannot write, or a folder: refused before drawing, one line
    for figure, words in ((out / "x.txt", "must end in one of"), (out, "is a folder")):
        assert main(["sweep", "plot", str(out), "--figure", str(figure)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err and "Traceback" not in err, err
    assert not (out / "x.txt").exists() and not (out.parent / "out.png").exists()
    assert main(["sweep", "plot", str(out), "--figure", str(out / "views.pdf")]) == 0
    assert (out / "views.pdf").stat().st_size > 1_000


def test_sampling_axes_give_the_processed_targets_laws(tmp_path, capsys):
    """A sweep's sampling axis runs the exact engine against the processed target (the same
    numbers as analyze(..., sampling=...)), the LP on the processed instance, and its command
    reproduces the verifier row; a bad sampling string is refused when the file is read."""
    cfg = load_config(textwrap.dedent("""
        [sweep]
        exact = true
        [[instances]]
        family = "random"
        vocab = 3
        block = 2
        seeds = [2]
        denominator = 12
        [[verifiers]]
        name = "block"
        sampling = ["", "temperature=0", "top_k=2"]
        [[optima]]
        problem = "node-budget"
        sampling = "top_k=2"
    """))
    rows = run_sweep(cfg, tmp_path / "out", workers=1)
    assert [r["sampling"] for r in rows] == ["", "temperature=0", "top_k=2", "top_k=2"]
    inst = random_instance(3, 2, 2, denominator=12)
    for r in rows[:3]:
        want = st.analyze(inst, "block", exact=True, sampling=r["sampling"] or None)
        assert Fraction(r["value_exact"]) == want.block_efficiency
    from spectheory.inputs.processing import process_instance

    assert Fraction(rows[3]["value_exact"]) == node_budget_lp(
        process_instance(inst, "top_k=2", None, True), exact=True).optimum
    assert Fraction(rows[3]["value_exact"]) == Fraction(rows[2]["value_exact"])  # block optimal
    assert len({r["job"] for r in rows}) == 4
    make, run = rows[1]["command"].split(" && ")
    assert "--sampling temperature=0" in run
    with pytest.raises(OptionError, match="sampling"):
        load_config('[[instances]]\nfamily="random"\nvocab=2\nblock=2\n[[verifiers]]\n'
                    'name="token"\nsampling="top_q=3"\n')


def test_only_reproduces_rows_afresh_and_leaves_the_table(tmp_path, capsys, monkeypatch):
    """The fallback reproducing command (``sweep CONFIG --only KEY``, used for toy families)
    recomputes the row, prints it, and neither rewrites the folder's table nor reads the cache;
    knobs a built-in family does not take are refused when the file is read."""
    cfg = tmp_path / "toy.toml"
    cfg.write_text('[[instances]]\nfamily = "toy:logit-noise"\nvocab = 2\nblock = 2\n'
                   'seeds = [0, 1]\nsigma = 0.5\n[[verifiers]]\nname = "block"\n')
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    before = (out / "results.csv").read_text()
    row = _table(out)[1]
    assert row["command"].startswith(f"spectheory sweep {cfg.resolve()} --only ")
    for cached in (out / "cache").glob("*.json"):  # a stale cache must not be what is printed
        cached.write_text(cached.read_text().replace(row["block_efficiency"], "0.5"))
    monkeypatch.chdir(tmp_path.parent)  # the command works from any folder
    assert main(row["command"].split()[1:] + ["--out", str(out)]) == 0
    (printed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed["job"] == row["job"] and str(printed["block_efficiency"]) == \
        row["block_efficiency"]
    assert (out / "results.csv").read_text() == before
    bad = tmp_path / "bad.toml"
    bad.write_text('[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\nseed = [0, 1]\n'
                   '[[verifiers]]\nname = "block"\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o2")]) == 2
    assert "unknown key 'seed' in [[instances]] #1" in capsys.readouterr().err
    bad.write_text('[[instances]]\nfamily = "toy:logit-noise"\nvocab = 2\nblock = 2\n'
                   'sigam = 1.0\n[[verifiers]]\nname = "block"\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o2")]) == 2
    assert "did you mean 'sigma'?" in capsys.readouterr().err


def test_a_drafting_warning_is_a_note_on_its_row(tmp_path):
    cfg = load_config('[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\n'
                      '[[verifiers]]\nname = "gbv"\npaths = 2\ndrafting = ["iid", "norep"]\n')
    rows = run_sweep(cfg, tmp_path / "out", workers=1)
    assert rows[0]["notes"] == "" and "iid" in rows[1]["notes"]
