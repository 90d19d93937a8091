"""Sweep grids beyond the full cross (`spectheory.sweep`): instances truncated from a deeper build,
methods restricted to block lengths, draft trees by shape, parameterised lossy rules, the coupling,
selection and L = 1 optima and the divergence measures, each equal to the public API's value;
strict keys for them; and a figure's grid that stops on a failed row."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from dataclasses import replace
from fractions import Fraction

import pytest

import spectheory as st
from spectheory.bounds import optimal_acceptance
from spectheory.runtime.errors import OptionError, SpectheoryError
from spectheory.lp import coupling_bound, selection_lp, tree_lp
from spectheory.sweep import expand, load_config, run_sweep
from spectheory.sweep.config import count_jobs
from spectheory.toy_models import make_instance, mean_divergence
from spectheory.engine.analysis import analyze_tree
from spectheory.verifiers.contrasts import lenient_verification, typical_acceptance

GRID = textwrap.dedent("""
    [[instances]]
    family = "toy:logit-noise"
    vocab = 3
    block = [1, 2, 3]
    seeds = [1]
    sigma = 1.0
    truncate_from = 3
    [[verifiers]]
    name = ["block", "lenient(0.8)", "typical(0.09, 0.3)"]
    block = [2, 3]
    [[verifiers]]
    name = "specinfer"
    drafting = "norep"
    shape = ["2", "2,1"]
    [[optima]]
    problem = ["coupling", "node-budget"]
    [[optima]]
    problem = "tree"
    shape = "2,1"
    drafting = ["topk", "iid"]
    [[optima]]
    problem = "selection"
    paths = 2
    block = 2
    [[optima]]
    problem = "multidraft-l1"
    paths = [2, 3]
    drafting = ["iid", "norep"]
    block = 1
    [[measures]]
    name = ["tv", "kl"]
    block = 3
""")


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    cfg = load_config(GRID)
    return cfg, run_sweep(cfg, tmp_path_factory.mktemp("grid") / "out", workers=2)


def _instance(L):
    """The grid's instance at block length L: built with L = 3, its first L levels kept."""
    built = make_instance("logit-noise", vocab_size=3, block_length=3, seed=1, sigma=1.0)
    return replace(built, block_length=L)


def test_restricted_grid_has_exactly_the_jobs_asked_for(grid_run):
    cfg, rows = grid_run
    got = sorted((r["block"], r["kind"], r["name"], r["paths"], r["drafting"], r["shape"])
                 for r in rows)
    want = sorted(
        [(L, "verifier", v, 1, "", "") for L in (2, 3)
         for v in ("block", "lenient(0.8)", "typical(0.09, 0.3)")]
        + [(1, "verifier", "specinfer", 2, "norep", "2"),
           (2, "verifier", "specinfer", 2, "norep", "2,1")]  # a shape runs at its depth
        + [(L, "optimum", p, 1, "", "") for L in (1, 2, 3) for p in ("coupling", "node-budget")]
        + [(2, "optimum", "tree", 2, d, "2,1") for d in ("topk", "iid")]
        + [(2, "optimum", "selection", 2, "iid", "")]
        + [(1, "optimum", "multidraft-l1", K, d, "") for K in (2, 3) for d in ("iid", "norep")]
        + [(3, "measure", m, 1, "", "") for m in ("tv", "kl")])
    assert got == want and count_jobs(cfg) == len(expand(cfg)) == len(rows) == 23
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    knobs = {r["knobs"] for r in rows}
    assert knobs == {json.dumps({"sigma": 1.0, "truncate_from": 3}, sort_keys=True)}


def test_every_row_equals_the_public_api(grid_run):
    _, rows = grid_run
    spec = {"lenient(0.8)": lenient_verification(0.8),
            "typical(0.09, 0.3)": typical_acceptance(0.09, 0.3), "block": "block"}
    for r in rows:
        inst = _instance(r["block"])
        be = r["block_efficiency"]
        if r["kind"] == "verifier" and r["shape"]:
            want = analyze_tree(inst, r["name"], r["shape"], r["drafting"])
            assert be == float(want.block_efficiency)
            assert json.loads(r["tau_pmf"]) == [float(v) for v in want.tau_pmf]
        elif r["kind"] == "verifier":
            assert be == float(st.analyze(inst, spec[r["name"]]).block_efficiency)
        elif r["name"] == "coupling":
            assert be == float(coupling_bound(inst).optimum)
        elif r["name"] == "tree":
            assert be == float(tree_lp(inst, r["shape"], r["drafting"]).optimum)
        elif r["name"] == "selection":
            assert be == float(selection_lp(inst, 2).optimum)
        elif r["name"] == "multidraft-l1":
            p, q = list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])
            assert be == 1.0 + float(optimal_acceptance(p, q, r["paths"], r["drafting"])[0])
        elif r["kind"] == "measure":
            assert r["value"] == mean_divergence(inst, r["name"]) and r["block_efficiency"] == ""
    # the lossy rule is lossy, the tree's i.i.d. optimum is at least the verifier's, and the
    # L = 1 optimum without replacement is at least the i.i.d. one
    by = {(r["block"], r["name"], r["paths"], r["drafting"]): r for r in rows}
    assert by[3, "lenient(0.8)", 1, ""]["tv_to_target"] > 1e-3
    assert by[1, "multidraft-l1", 3, "norep"]["block_efficiency"] >= \
        by[1, "multidraft-l1", 3, "iid"]["block_efficiency"]


def test_truncation_keeps_the_deep_build(grid_run):
    """A planted bug: building each L afresh gives other models (the draft's noise depends on
    how many target levels were drawn), so a sweep that ignored truncate_from is caught."""
    _, rows = grid_run
    row = next(r for r in rows if r["block"] == 2 and r["name"] == "block")
    fresh = make_instance("logit-noise", vocab_size=3, block_length=2, seed=1, sigma=1.0)
    assert row["block_efficiency"] == float(st.analyze(_instance(2), "block").block_efficiency)
    assert row["block_efficiency"] != float(st.analyze(fresh, "block").block_efficiency)


def test_exact_tree_and_selection_rows_are_fractions(tmp_path):
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
        name = "specinfer"
        shape = "2,1"
        [[optima]]
        problem = ["coupling"]
    """))
    rows = run_sweep(cfg, tmp_path / "out", workers=2)
    inst = st.random_instance(2, 2, 3, denominator=12)
    tree, coupling = rows
    assert Fraction(tree["value_exact"]) == analyze_tree(inst, "specinfer", "2,1",
                                                         exact=True).block_efficiency
    assert Fraction(coupling["value_exact"]) == coupling_bound(inst, exact=True).optimum
    assert "--only" in tree["command"]
    # the L = 1 optimum on instances of block 2 only: refused when the file is read
    with pytest.raises(OptionError, match="multidraft-l1.* block length 1"):
        load_config('[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\n'
                    '[[optima]]\nproblem = ["coupling", "multidraft-l1"]\n')


def test_bad_parameterised_rule_is_refused_when_the_file_is_read(tmp_path):
    head = '[[instances]]\nfamily = "random"\nvocab = 2\nblock = 1\n[[verifiers]]\nname = '
    with pytest.raises(OptionError, match=r"lenience 2 must be in \(0, 1\]"):
        load_config(head + '["lenient(2)", "lenient(0.5)"]\n')
    with pytest.raises(OptionError, match="parameters must be numbers"):
        load_config(head + '["lenient(x)", "lenient(0.5)"]\n')
    (good,) = run_sweep(load_config(head + '["lenient(0.5)"]\n'), tmp_path / "out", workers=1)
    assert good["status"] == "ok" and good["command"].startswith("spectheory sweep CONFIG --only")


@pytest.mark.parametrize("text, message", [
    ('name = "specinfer"\nshape = "2,1"\npaths = 2\n', "paths does not go with shape"),
    ('name = "specinfer"\nshape = "2,x"\n', "branching factors such as"),
])
def test_bad_tree_keys_are_one_line(text, message):
    head = '[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\n[[verifiers]]\n'
    with pytest.raises(OptionError) as exc:
        load_config(head + text)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("tail, message", [
    ('[[optima]]\nproblem = "tree"\n', 'problem "tree" needs a shape'),
    ('[[optima]]\nproblem = "direct"\nshape = "2"\n', 'problem "tree" needs a shape'),
    ('[[measures]]\nname = "tvd"\n', "did you mean 'tv'?"),
    ('[[measures]]\nname = "tv"\nblock = 0\n', "block must be integers in [1, 64]"),
])
def test_bad_optima_and_measures_are_one_line(tail, message):
    head = '[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\n'
    with pytest.raises(OptionError) as exc:
        load_config(head + tail)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_truncate_from_below_a_block_is_refused():
    with pytest.raises(OptionError, match=r"truncate_from must be integers in \[3, 64\]"):
        load_config('[[instances]]\nfamily = "toy:dirichlet"\nvocab = 2\nblock = [1, 3]\n'
                    'truncate_from = 2\n[[verifiers]]\nname = "block"\n')


@pytest.mark.parametrize("knob", ["sigma = [0.5, nan]", "alpha = inf", "sigma = -inf"])
def test_a_toy_knob_that_is_not_finite_is_refused_when_the_file_is_read(knob, user_modules):
    """No toy family takes a NaN or infinite knob: each job of the grid failed as a row (exit 1)
    after the sweep had started; the file is refused when it is read."""
    name = knob.split()[0]
    with pytest.raises(OptionError, match=rf"\[\[instances\]\] #1 {name} = -?(nan|inf) is not a "
                                          r"finite number \(every knob of toy:logit-noise"):
        load_config('[[instances]]\nfamily = "toy:logit-noise"\nvocab = 3\nblock = 2\n'
                    f'{knob}\n[[verifiers]]\nname = "token"\n')
    # a module:function family's knobs are its own: a NaN is passed on
    user_modules(mymod="import spectheory as st\n"
                       "def family(vocab_size, block_length, seed, **knobs):\n"
                       "    return st.random_instance(vocab_size, block_length, seed)\n")
    cfg = load_config('[[instances]]\nfamily = "mymod:family"\nvocab = 3\nblock = 2\n'
                      f'{knob}\n[[verifiers]]\nname = "token"\n')
    value = float(knob.split("=")[1].strip(" []").split(",")[-1])
    assert [j for j in expand(cfg) if repr(dict(j.knobs)[name]) == repr(value)]


@pytest.mark.parametrize("family, knobs, message", [
    ("logit-noise", 'sigma = [0.5, "big"]', "sigma = 'big': sigma must be a number, got 'big'"),
    ("logit-noise", "sigma = -1e308", "sigma = -1e+308: sigma = -1e+308 is out of range"),
    ("mixture", "eps = [0.5, 2]", "eps = 2: eps = 2 is out of range [0, 1]"),
    ("markov", "lam = -0.5", "lam = -0.5: lam = -0.5 is out of range [0, 1]"),
    ("temperature", "temperature = 0", "temperature = 0: temperature = 0 is out of range"),
    ("ngram", "order = [4, 6]\ndraft_order = 5",
     "draft_order = 5, order = 4: draft_order = 5 is out of range (1..order = 4)"),
    ("dirichlet", "denominator = 0", "denominator = 0: denominator = 0 is out of range"),
])
def test_a_toy_knob_the_family_refuses_is_refused_when_the_file_is_read(family, knobs, message):
    """A toy knob value the family refuses (a text, out of its range) was taken when the file
    was read and every job with it failed as a row (exit 1, an output folder); the file is
    refused in one line, and the knob values the family takes still read (ngram's draft_order
    is checked against the order it comes with)."""
    head = f'[[instances]]\nfamily = "toy:{family}"\nvocab = 3\nblock = 2\n'
    with pytest.raises(OptionError) as exc:
        load_config(f'{head}{knobs}\n[[verifiers]]\nname = "token"\n')
    assert str(exc.value).startswith(f"[[instances]] #1: toy:{family} refuses {message}"), \
        exc.value
    assert str(exc.value).endswith("(each job would fail)")
    cfg = load_config(f'{head}order = [6]\ndraft_order = [5]\n[[verifiers]]\nname = "token"\n'
                      .replace(f"toy:{family}", "toy:ngram"))
    assert len(expand(cfg)) == 1


@pytest.mark.parametrize("name", ["typical(0.09, 0.3)", "cactus", "entropy-verify"])
def test_a_float_only_verifier_under_exact_is_refused_when_the_file_is_read(name):
    """Under [sweep] exact = true a verifier with a float law only failed every job (exit 1);
    the file is refused in one line, and the same table without exact reads."""
    body = ('[[instances]]\nfamily = "random"\nvocab = [2]\nblock = [2]\n[[verifiers]]\n'
            f'name = ["token", "{name}"]\n')
    with pytest.raises(OptionError) as exc:
        load_config("[sweep]\nexact = true\n" + body)
    assert str(exc.value) == (f"[[verifiers]] #1: verifier {name!r} has a float law only (no "
                              "exact rational mode), and [sweep] exact = true: every job would "
                              "fail; set exact = false or list it in a sweep of its own")
    assert len(expand(load_config(body))) == 2


def test_a_sampling_token_outside_every_vocabulary_is_refused_when_the_file_is_read():
    """``logit_bias=7:1`` on V = 2: every job failed as a row (exit 1). Refused when the file is
    read when no instance the table runs on has the token; run (its small-V jobs failing as
    rows) when one has."""
    head = '[[instances]]\nfamily = "random"\nvocab = {}\nblock = 2\n[[verifiers]]\nname = "token"\n'
    for sampling in ('sampling = ["logit_bias=7:1"]', 'draft_sampling = "min_tokens=1,stop_token_ids=9"'):
        key = sampling.split()[0]
        with pytest.raises(OptionError, match=rf"\[\[verifiers\]\] #1 {key} '.*' names token \d, "
                                              r"outside every vocabulary it runs on \(at most "
                                              r"0\.\.3\): every job would fail"):
            load_config(head.format("[2, 4]") + sampling + "\n")
        assert load_config(head.format("[2, 10]") + sampling + "\n")
    edge = 'sampling = ["logit_bias=4:-1"]\n'  # the vocabulary's edge: 4 is outside 0..3
    with pytest.raises(OptionError, match="names token 4, outside every vocabulary"):
        load_config(head.format("[2, 4]") + edge)
    assert load_config(head.format("[2, 5]") + edge)
    with pytest.raises(OptionError, match="stop_token_ids = 1 act here only with min_tokens"):
        load_config(head.format(3) + 'sampling = "stop_token_ids=1"\n')


def test_plain_grids_keep_their_job_keys():
    """The new inputs enter a job's key only when set, so earlier caches stay valid."""
    import hashlib

    from spectheory import __version__
    from spectheory.sweep import example_config

    for job in expand(load_config(example_config())):
        inputs = {k: v for k, v in job.inputs().items()
                  if k not in ("sampling", "draft_sampling", "shape")}
        text = json.dumps({"v": __version__, **inputs}, sort_keys=True)
        assert job.key() == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_figure_grid_stops_on_a_failed_row(tmp_path, monkeypatch):
    """The figures' `run_grid`: a job that fails is never dropped from a figure (a verifier
    that fails on one instance: the file is valid, the job fails when it runs)."""
    from spectheory import figures

    (tmp_path / "onebadseed.py").write_text(textwrap.dedent("""
        from spectheory.verifiers.block import block_verification

        def law(drafts, q, p):
            if float(q[0, 0, 0]) == BAD:
                raise RuntimeError("no law for this instance")
            return block_verification(drafts, q, p)
    """).replace("BAD", repr(float(st.random_instance(2, 1, 1).draft.level(0)[0, 0]))))
    monkeypatch.syspath_prepend(str(tmp_path))
    figures.load(figures.gallery_folder() / "fig3_tau_pmf.py")  # puts the gallery's _common
    common = sys.modules["_common"]
    config = {"instances": [{"family": "random", "vocab": 2, "block": 1, "seeds": [0, 1]}],
              "verifiers": [{"name": ["block", "onebadseed:law"]}]}
    with pytest.raises(SpectheoryError) as exc:
        common.run_grid(config)
    text = str(exc.value)
    assert text.startswith("1 of 4 jobs of the figure sweep did not finish")
    assert "onebadseed:law, K = 1 on random (V = 2, L = 1, seed 1): failed: " in text
    assert "no law for this instance" in text
    assert common.sweep_toml({"instances": [{"alpha": 0.1 + 0.2}]}) == \
        "[[instances]]\nalpha = 0.30000000000000004\n"


# ----------------------------------------------------------------------------- batches


def test_batches_give_the_table_of_one_job_per_process(tmp_path):
    from spectheory.sweep import example_config
    from spectheory.sweep.runner import RUN_COLUMNS

    one = run_sweep(load_config(example_config()), tmp_path / "one", workers=2)
    cfg = load_config(example_config().replace("[sweep]", "[sweep]\nbatch = 5"))
    assert cfg.batch == 5
    batched = run_sweep(cfg, tmp_path / "five", workers=2)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in RUN_COLUMNS} for r in rows]
    assert strip(batched) == strip(one) and all(r["status"] == "ok" for r in batched)
    assert len(list((tmp_path / "five" / "cache").glob("*.json"))) == 12  # a file per job


def test_a_stopped_or_crashed_job_ends_its_batch_and_the_rest_run_again(tmp_path,
                                                                        monkeypatch):
    module = tmp_path / "batchver.py"
    module.write_text(textwrap.dedent("""
        import os, time
        from spectheory.verifiers.token import token_verification

        def ok(drafts, q, p):
            return token_verification(drafts, q, p)

        ok2 = ok3 = ok

        def raise_(drafts, q, p):
            raise RuntimeError("boom")

        def hang(drafts, q, p):
            time.sleep(60)

        def die(drafts, q, p):  # a crash (os._exit is refused by the call guard: a failed row)
            os.kill(os.getpid(), 9)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(textwrap.dedent("""
        [sweep]
        time_limit = 3
        batch = 6
        [[instances]]
        family = "random"
        vocab = 2
        block = 2
        [[verifiers]]
        name = ["batchver:ok", "batchver:raise_", "batchver:hang", "batchver:ok2",
                "batchver:die", "batchver:ok3"]
    """))
    rows = run_sweep(cfg, tmp_path / "out", workers=1)
    got = [(r["name"].split(":")[1], r["status"]) for r in rows]
    assert got == [("ok", "ok"), ("raise_", "failed"), ("hang", "timeout"), ("ok2", "ok"),
                   ("die", "crashed"), ("ok3", "ok")]
    assert "time limit of 3 s" in rows[2]["error"] and "exit code -9" in rows[4]["error"], rows[4]
    want = float(st.analyze(st.random_instance(2, 2, 0), "token").block_efficiency)
    assert rows[3]["block_efficiency"] == rows[5]["block_efficiency"] == want


def test_no_memory_limit_reads_no_memory(tmp_path, monkeypatch):
    from spectheory.sweep import guard

    def refuse(pid):
        raise AssertionError("memory read although memory_limit_mb = 0")

    monkeypatch.setattr(guard, "_private_mb", refuse)
    for batch in (1, 3):
        cfg = load_config('[sweep]\nmemory_limit_mb = 0\nbatch = %d\n[[instances]]\n'
                          'family = "random"\nvocab = 3\nblock = 3\nseeds = [0, 1, 2]\n'
                          '[[verifiers]]\nname = "block"\n' % batch)
        assert cfg.memory_limit_mb == 0
        rows = run_sweep(cfg, tmp_path / f"out{batch}", workers=2)
        assert [r["status"] for r in rows] == ["ok"] * 3
    with pytest.raises(OptionError, match=r"memory_limit_mb \(0 for none\)"):
        load_config('[sweep]\nmemory_limit_mb = 10\n[[instances]]\nfamily = "random"\n'
                    'vocab = 2\nblock = 2\n[[verifiers]]\nname = "block"\n')


def _watch(guard, job, seconds: float) -> tuple[float, dict]:
    """Run a child that sleeps ``seconds`` under ``job``'s limits; (wall time, its outputs)."""
    g = guard._Guarded([job], lambda j: time.sleep(seconds) or {"status": "ok"})
    start = time.perf_counter()
    while True:
        results, rest = g.poll()
        if rest is not None:
            return time.perf_counter() - start, results[0][1]
        guard._wait([g])


def test_memory_reads_cost_a_small_share_of_the_watch(monkeypatch):
    """A child far below its memory limit: the parent's reads of its private memory
    (smaps_rollup, milliseconds each for a child of a large process) take at most about a tenth
    of the time the job runs (one every 20 ms took most of a core). A child whose resident set
    nears the limit (or cannot be read) has its private memory read at every check, as before."""
    from types import SimpleNamespace

    from spectheory.sweep import guard

    spent = []
    real = guard._private_mb

    def timed(pid):
        t = time.perf_counter()
        out = real(pid)
        spent.append(time.perf_counter() - t)
        return out

    monkeypatch.setattr(guard, "_private_mb", timed)
    job = SimpleNamespace(time_limit=60, memory_limit_mb=100_000)
    wall, out = _watch(guard, job, 1.0)
    assert out == {"status": "ok"}
    assert spent and sum(spent) <= 0.1 * wall + 2 * max(spent), (len(spent), sum(spent), wall)
    for value in (0.95 * job.memory_limit_mb, None):
        spent.clear()
        checks = []

        def resident(pid, value=value):  # a check: the resident set near the limit, or unread
            checks.append(pid)
            return value

        monkeypatch.setattr(guard, "_resident_mb", resident)
        wall, out = _watch(guard, job, 0.4)
        assert out == {"status": "ok"}
        # every check read the private memory (counted by the checks made, not by how many
        # reads of a given cost fit in the wall time: a read from a large parent takes ~20 ms)
        assert len(checks) >= 2 and len(spent) >= len(checks), (len(checks), len(spent), wall)


def test_a_batch_shares_each_deep_build_and_keeps_instances_apart(tmp_path, monkeypatch):
    """Within a batch the instance a truncate_from job cuts is built once per (family, V, seed,
    knobs) and reused for every block length: each row still equals its own instance's value
    (a cache keyed too coarsely would hand one seed's or knob's models to another)."""
    from spectheory.sweep import jobs

    cfg = load_config(textwrap.dedent("""
        [sweep]
        batch = 100
        [[instances]]
        family = "toy:mixture"
        vocab = 3
        block = [1, 2, 3]
        seeds = [0, 1]
        eps = [0.2, 0.7]
        truncate_from = 3
        [[verifiers]]
        name = "block"
    """))
    rows = run_sweep(cfg, tmp_path / "out", workers=1)
    for r in rows:
        eps = json.loads(r["knobs"])["eps"]
        built = make_instance("mixture", vocab_size=3, block_length=3, seed=r["seed"], eps=eps)
        want = st.analyze(replace(built, block_length=r["block"]), "block").block_efficiency
        assert r["block_efficiency"] == float(want)
    assert len({r["block_efficiency"] for r in rows}) == 12
    monkeypatch.setattr(jobs, "_BUILT", {})
    a = jobs.build_instance("toy:mixture", 3, 1, 0, {"eps": 0.2, "truncate_from": 3}, False)
    b = jobs.build_instance("toy:mixture", 3, 2, 0, {"eps": 0.2, "truncate_from": 3}, False)
    assert a.target is b.target and (a.block_length, b.block_length) == (1, 2)
    monkeypatch.setattr(jobs, "_BUILT_CELLS", 1)  # over the bound: only the newest is kept
    jobs.build_instance("toy:mixture", 3, 1, 1, {"eps": 0.2, "truncate_from": 3}, False)
    assert len(jobs._BUILT) == 1
