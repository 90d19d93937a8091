"""Bad inputs found by a later outside probe of the command line and the Python API, each refused
in one line (exit code 2 from the command line), where before they gave a traceback, a wrong
verdict, a silent exit 0 or a read without end:

* user code whose exception cannot be printed (its ``__str__`` raises), at import and in a call;
* a module that calls ``os._exit(0)`` while it is imported (exit 0 and no output: a pass to CI);
* a sweep file nested 100,000 deep (a RecursionError), and 150,000 seeds (a quadratic duplicate
  check, minutes before the job cap);
* ``check --lossless-tol 0`` in floats, which called a lossless verifier LOSSY for a TV of 1e-17;
* ``check_file("/dev/zero")`` and an n-gram text of ``/dev/zero`` (read until memory ran out);
* a size of 10^5000 sequences (Python refuses to print it in decimal);
* a grammar's ``eos`` outside the vocabulary; ``sample_drafts`` with n = 10^12 or -1."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import torch
import pytest

import spectheory as st
from cli_helpers import refused, run, write
from spectheory.engine.sampling import sample_drafts
from spectheory.inputs.instances import instance_to_dict
from spectheory.inputs.stateful import GrammarError, TokenAutomaton
from spectheory.runtime.errors import OptionError, SizeLimitError, SpectheoryError
from spectheory.runtime.limits import decimal_exponent, human_count
from spectheory.runtime.sizes import check_size
from spectheory.sweep.config import load_config
from spectheory.testing.checks import vectors
from spectheory.toy_models import ngram

BAD_STR = '''
class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("str boom")
'''


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    (tmp_path / "badstr_call.py").write_text(BAD_STR + "def f(*a, **k):\n    raise BadStr()\n")
    (tmp_path / "badstr_import.py").write_text(BAD_STR + "raise BadStr()\n")
    (tmp_path / "exits_at_import.py").write_text("import os\nos._exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("args, words", [
    (["check-step", "badstr_call:f", "--samples", "2000"],
     ["badstr_call:f", "BadStr", "cannot be printed"]),
    (["check-sampler", "badstr_import:f"], ["badstr_import", "BadStr", "cannot be printed"]),
    (["check-step", "badstr_import:f"], ["badstr_import", "BadStr", "cannot be printed"]),
])
def test_user_code_whose_exception_cannot_be_printed(args, words, user_modules, capsys):
    refused(*run(args, capsys), *words)


@pytest.mark.parametrize("command", ["check-sampler", "check-step"])
def test_a_module_that_exits_while_imported_is_refused(command, user_modules):
    """In a process of its own: a module that calls os._exit(0) at import would end it with exit
    0 and no output (which CI reads as a pass); it is refused in one line, exit code 2."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "spectheory", command, "exits_at_import:f"],
                          cwd=user_modules, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    for w in ("exits_at_import", "os._exit(0)", "imported"):
        assert w in proc.stderr, proc.stderr


SWEEP = """[sweep]
name = "x"
[[instances]]
family = "random"
vocab = [2]
block = [1]
{axis}
[[verifiers]]
name = "token"
"""


def test_sweep_files_nested_deep_or_with_long_axes_are_refused():
    with pytest.raises(OptionError, match="nested too deeply"):
        load_config(SWEEP.format(axis="seeds = [0]") + "x = " + "[" * 100_000 + "]" * 100_000
                    + "\n")
    seeds = ", ".join(map(str, range(150_000)))
    with pytest.raises(OptionError, match="150,000 jobs, more than 100,000"):
        load_config(SWEEP.format(axis=f"seeds = [{seeds}]"))
    for axis, twice in (("seeds = [0, 1, 0]", "lists 0 more than once"),
                        ("seeds = [0]\nalpha = [1, 1.0]", "lists 1.0 more than once (as 1)"),
                        ("seeds = [0]\nalpha = [true, 1]", None)):
        if twice is None:  # true and 1 are different values of an axis
            with pytest.raises(OptionError) as err:
                load_config(SWEEP.format(axis=axis))
            assert "more than once" not in str(err.value)
            continue
        with pytest.raises(OptionError, match=twice.replace("(", r"\(").replace(")", r"\)")):
            load_config(SWEEP.format(axis=axis))


def test_float_check_at_tolerance_zero_refuses_to_call_rounding_a_loss(tmp_path, capsys):
    """A lossless verifier's float TV is a rounding error (about 1e-17): at tolerance 0 the
    command refuses (exact mode decides) instead of printing LOSSY; a lossy control is still
    LOSSY at tolerance 0, and a TV of exactly 0 is still lossless there."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1)))
    code, out, err = run(["check", path, "--lossless-tol", "0"], capsys)
    refused(code, out, err, "within float64 rounding", "--exact")
    code, out, err = run(["check", path, "--lossless-tol", "0", "--verifier",
                          "uniform-product"], capsys)
    assert code == 1 and "LOSSY" in out
    exact = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)),
                  "exact.json")
    code, out, err = run(["check", exact, "--lossless-tol", "0", "--exact"], capsys)
    assert code == 0, err
    with pytest.raises(SpectheoryError, match="within float64 rounding"):
        st.check_lossless("block", st.random_instance(3, 2, 1), tol=0.0)


def test_unbounded_files_are_read_only_so_far(monkeypatch):
    monkeypatch.setattr(vectors, "MAX_VECTOR_CHARS", 2**20)
    with pytest.raises(SpectheoryError, match="more than a vector file holds"):
        vectors.check_file("/dev/zero")
    monkeypatch.setattr(ngram, "MAX_TEXT_CHARS", 2**20)
    ngram.load_text.cache_clear()
    with pytest.raises(SpectheoryError, match="holds more than 1 Mi characters"):
        ngram.load_text("/dev/zero")


def test_sizes_beyond_python_s_decimal_limit_are_named_by_their_exponent():
    with pytest.raises(SizeLimitError, match=r"~10\^5000 sequences"):
        check_size(10**5000, "an enumeration")
    rng = np.random.default_rng(0)
    for n in [1, 9, 10, 99, 10**15, 10**15 - 1, 10**300, 2**64] + \
            [int(rng.integers(1, 10**9)) * 10**int(rng.integers(0, 400)) - int(k)
             for k in range(2) for _ in range(200)]:
        if n >= 1:
            assert decimal_exponent(n) == len(str(n)) - 1, n
    assert human_count(10**5000 - 1) == "~10^4999"


@pytest.mark.parametrize("eos", [3, -1, "a", 2.5, True])
def test_a_grammar_s_stop_token_must_be_one_of_its_tokens(eos):
    with pytest.raises(GrammarError, match="eos"):
        TokenAutomaton([[0, 0, 0]], eos=eos)
    assert TokenAutomaton([[0, 0, 0]], eos=np.int64(2)).eos == 2


@pytest.mark.parametrize("n, error", [(10**12, SizeLimitError), (-1, SpectheoryError),
                                      (0, SpectheoryError), (2.5, SpectheoryError),
                                      (True, SpectheoryError)])
def test_sample_drafts_counts_are_checked_before_allocating(n, error):
    with pytest.raises(error, match="n = |outcomes"):
        sample_drafts(st.random_instance(3, 2, 1), 2, n)
    assert tuple(sample_drafts(st.random_instance(3, 2, 1), 2, 5).shape) == (5, 2, 2)


def _registered():
    from spectheory.registry import registered

    return registered()


@pytest.mark.parametrize("name", _registered())
def test_verifier_laws_refuse_drafts_and_shapes_of_the_wrong_form(name):
    """Every registered verifier, through its spec (`law` and the call in its own form): a
    drafted token equal to V or negative (before: an index error, or for Hu's and Khisti's
    rules the mass of another path), float drafts, and p with L rows instead of L + 1 are
    refused in one line naming the verifier; valid inputs give the law as before."""
    from spectheory.registry import get_verifier

    spec = get_verifier(name)
    K = 1 if spec.single_path else 2
    g = torch.Generator().manual_seed(3)
    q = torch.softmax(torch.randn(2, K, 3, 5, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(2, K, 4, 5, generator=g, dtype=torch.float64), -1)
    q[:, :, 0], p[:, :, 0] = q[:, :1, 0], p[:, :1, 0]
    x = torch.multinomial(q.reshape(-1, 5), 1, generator=g).view(2, K, 3)
    one = (lambda t: t[:, 0]) if spec.single_path else (lambda t: t)
    want = spec.law(x, q, p)
    for bad, words in ((5, "outside 0..4"), (-1, "outside 0..4")):
        y = x.clone()
        y[1, -1, 2] = bad
        for call in (lambda: spec.law(y, q, p), lambda: spec(one(y), one(q), one(p))):
            with pytest.raises(SpectheoryError, match=words) as err:
                call()
            assert name in str(err.value)
    with pytest.raises(SpectheoryError, match="integer ids"):
        spec(one(x).double(), one(q), one(p))
    with pytest.raises(SpectheoryError, match="do not fit"):
        spec.law(x, q, p[:, :, :3])
    got = spec.law(x, q, p)
    assert torch.equal(got.stop, want.stop) and torch.equal(got.correction, want.correction)


def test_sample_steps_refuses_num_draft_zero_as_its_own_argument():
    """num_draft = 0 was passed to the kit's step, whose failure then named the step; it is
    the caller's argument, refused as check_step refuses it."""
    from spectheory.testing import sample_steps, vllm_v1_step

    with pytest.raises(OptionError, match="num_draft = 0 must be an integer in 1..64"):
        sample_steps(vllm_v1_step, st.random_instance(3, 2, 1), 10, num_draft=0)
    assert sample_steps(vllm_v1_step, st.random_instance(3, 2, 1), 10, num_draft=2).sum() == 10


def test_sample_output_refuses_tables_that_are_not_laws():
    """sample_output drew from any table (it scales each row by its total): a zero stop row
    gave the last position, a row summing to 2 a normalised draw, a negative correction entry
    a token. Each is refused in one line; prefix-dependent valid laws (float64 and float32 rows
    normalised over 151,936 tokens) are sampled as before, with given uniforms exactly."""
    from spectheory.law import Law, LawError
    from spectheory.sampling import inverse_cdf, sample_output

    third = torch.full((1, 3, 3), 1 / 3, dtype=torch.float64)
    bad = [(torch.zeros(1, 3, dtype=torch.float64), third, "stop row of batch row 0 sums to 0"),
           (torch.tensor([[1., .5, .5]], dtype=torch.float64), third, "sums to 2"),
           (torch.tensor([[np.nan, .5, .5]], dtype=torch.float64), third, "non-finite"),
           (torch.tensor([[1., 0, 0]], dtype=torch.float64),
            torch.tensor([[[1.5, -.5, 0]] * 3], dtype=torch.float64),
            "correction row of batch row 0 has a negative entry (-0.5)"),
           (np.array([[1., 0, 0]]), third.numpy(), "torch tensors")]
    for stop, corr, words in bad:
        with pytest.raises(LawError, match=words.replace("(", r"\(").replace(")", r"\)")):
            sample_output(Law(stop, corr))
    good = Law(torch.tensor([[.5, .25, .25]], dtype=torch.float64), third)
    for u in (torch.tensor([[1., .5]], dtype=torch.float64), torch.tensor([[np.nan, .5]]),
              torch.zeros(2, 2, dtype=torch.float64),
              torch.tensor([[-1e-300, .5]], dtype=torch.float64)):
        with pytest.raises(LawError, match="uniforms"):
            sample_output(good, uniforms=u)
    g = torch.Generator().manual_seed(0)
    V = 151_936
    corr = torch.softmax(torch.randn(4, 3, V, generator=g) * 3, -1)  # float32 rows
    stop = torch.softmax(torch.randn(4, 3, generator=g, dtype=torch.float64), -1)
    u = torch.rand(4, 2, generator=g, dtype=torch.float64)
    k, tau, y = sample_output(Law(stop, corr), uniforms=u)
    want_tau = inverse_cdf(stop, u[:, 0])
    assert torch.equal(tau, want_tau) and torch.equal(k, torch.zeros_like(k))
    assert torch.equal(y, inverse_cdf(corr[torch.arange(4), want_tau].double(), u[:, 1]))


def test_tree_sampler_outputs_on_the_meta_device_are_a_note_not_a_traceback():
    """A tree sampler that returns meta tensors (a shape without values) gets the note the
    chain checks give (before: torch's NotImplementedError from the copy to the CPU)."""
    from spectheory.testing.checks.tree import _outputs

    ok = torch.tensor([0, 1, 2])
    got, note = _outputs((ok.to("meta"), ok), 3, 5, 3, "tree sampler m:f")
    assert got is None and "node" in note and "meta device" in note
    got, note = _outputs((ok, ok.to("meta")), 3, 5, 3, "tree sampler m:f")
    assert got is None and "token" in note and "meta device" in note
    got, note = _outputs((ok, ok), 3, 5, 3, "tree sampler m:f")
    assert note is None and all(torch.equal(g, ok) for g in got)


def test_a_grammar_of_the_user_s_own_class_is_user_code():
    """A TokenAutomaton subclass is the user's code: its allowed() raising is one line naming
    the grammar (before: the bare exception), and a mask of another shape or kind (None, [n, 7]
    over 3 tokens) is refused (before: numpy's broadcast error, or None read as no mask)."""
    from spectheory.inputs.processing import process_rows
    from spectheory.runtime.errors import UserCodeError

    class Raises(TokenAutomaton):
        def allowed(self, states):
            raise RuntimeError("boom")

    class Wide(TokenAutomaton):
        def allowed(self, states):
            return np.ones((len(states), 7), bool)

    class Nothing(TokenAutomaton):
        def allowed(self, states):
            return None

    inst = st.random_instance(3, 2, 1)
    rows = np.full((2, 3), 1 / 3)
    for cls, error, words in ((Raises, UserCodeError, "allowed() of grammar 'g' raised "
                               "RuntimeError: boom"),
                              (Wide, GrammarError, ", 7]; a mask is a bool array"),
                              (Nothing, GrammarError, "returned NoneType")):
        g = cls([[0, 0, 0]], name="g")
        for call in (lambda: st.analyze(inst, "token", sampling={"grammar": g}),
                     lambda: process_rows(rows, {"grammar": g}, history=np.zeros((2, 1), int))):
            with pytest.raises(error) as err:
                call()
            assert words in str(err.value)
    plain = TokenAutomaton([[0, 0, 0]], name="g")
    assert st.analyze(inst, "token", sampling={"grammar": plain}).tv_to_target < 1e-12


def test_sigterm_removes_what_was_being_written(tmp_path):
    """SIGTERM (what `timeout` and job schedulers send) during `figures` ended the process at
    once and left its hidden temporary folder; it now unwinds like an interrupt: exit 143, one
    line, nothing left behind (the figure workers forked meanwhile still just end), neither
    beside the output nor the sweep folder of the figure being computed (in /dev/shm, or the
    system's temporary folder), which the handler's exit used to skip."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    import os

    def default_sigterm():  # a test runner's worker may ignore SIGTERM, which exec inherits
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    shm = Path("/dev/shm")
    scratch = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())

    def sweep_folders():  # figure grids' folders (another test process may have its own)
        return {p.name for p in scratch.glob("spectheory-fig-*")}

    before = sweep_folders()
    proc = subprocess.Popen([sys.executable, "-m", "spectheory", "figures", "--out",
                             str(tmp_path / "figs")], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigterm,
                            start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (
                any(p.name.startswith(".figs.partial-") for p in tmp_path.iterdir())
                and sweep_folders() - before):  # the first figure's grid is running
            time.sleep(0.05)
        assert any(p.name.startswith(".figs.partial-") for p in tmp_path.iterdir())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:  # never leave the command (and its figure workers) running
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("spectheory: terminated") and \
        "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
    deadline = time.time() + 30  # another process's grid folder goes when its run ends
    while sweep_folders() - before and time.time() < deadline:
        time.sleep(0.2)
    assert not sweep_folders() - before


def test_user_code_that_closes_stdout_keeps_the_report(tmp_path, monkeypatch, capsys):
    """User code's standard output is the toolkit's standard error while it runs; a sampler
    that closed it closed standard error, and the line reporting its failure was lost. Now the
    close does nothing and the failure is reported."""
    (tmp_path / "closer.py").write_text(
        "import sys\ndef f(*a, **k):\n    sys.stdout.close()\n    raise ValueError('closed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    refused(*run(["check-sampler", "closer:f", "--samples", "2000"], capsys),
            "sampler closer:f raised ValueError: closed")
    import sys

    assert not sys.stderr.closed


@pytest.mark.parametrize("args", [
    ["--time-limit", "٣"], ["--time-limit", "1_0"], ["--time-limit", "1e-400"],
    ["--lossless-tol", "1e-400"], ["--tol", "٠.٥"]])
def test_numbers_on_the_command_line_are_ascii_and_not_read_as_zero(args, tmp_path, capsys):
    """float() takes other scripts' digits ("٣" read as 3), underscores ("1_0") and numbers
    below the smallest float ("1e-400" read as 0); the options refuse them, as the integer
    options already did."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1)))
    code, out, err = run(["check", path, *args], capsys)
    refused(code, out, err, args[0])
    assert "ASCII" in err or "smallest float" in err


def test_other_number_parsers_refuse_other_scripts_digits(tmp_path, capsys):
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1)))
    refused(*run(["lp", path, "--problem", "frontier", "--tv", "٣"], capsys), "--tv")
    for seed in ("٣", "+-5", "--5", "5-"):  # "+-5" passed a strip of signs, then int() raised
        refused(*run(["check-sampler", "spectheory.testing:reference_sampler", "--seed=" + seed],
                     capsys), "--seed", "ASCII")
    from spectheory.runtime.limits import parse_float

    assert parse_float(" 2.5e-3 ") == 2.5e-3 and parse_float("-0") == 0.0
    for bad in ("٣", "1_0", "0x10", "1e-400", "", "3 4"):
        with pytest.raises(OptionError):
            parse_float(bad)


@pytest.mark.parametrize("kw", [{"tol": -1}, {"tol": float("nan")}, {"tol": "1e-8"},
                                {"cuts_per_depth": 0}, {"cuts_per_depth": -5},
                                {"max_rounds": -1}, {"max_rounds": True}])
def test_multipath_lp_options_are_checked(kw):
    """tol = -1 or NaN and cuts_per_depth <= 0 were accepted (the cutting planes then never
    stopped, or cut nothing), max_rounds = -1 said 'did not converge in -1 rounds'."""
    from spectheory.lp import multipath_lp
    from spectheory.lp.result import LPError

    with pytest.raises(LPError, match=list(kw)[0]):
        multipath_lp(st.random_instance(3, 2, 1), 2, **kw)


def test_kit_sizes_are_bounded_before_allocating():
    """The kit's instance maker and tree drafting took sizes a caller typed to the allocator
    (7.28 TiB and 40 TB requested, then MemoryError or torch's error); they are refused first,
    and valid sizes give what they gave."""
    from spectheory.testing.checks.battery import make_instance
    from spectheory.testing.checks.tree import draft_trees

    with pytest.raises(SizeLimitError, match="V\\^\\(L\\+1\\) = 1000000\\^21"):
        make_instance("dirichlet", 10**6, 20, 1)
    with pytest.raises(OptionError, match="V = 2.5"):
        make_instance("dirichlet", 2.5, 2, 1)
    assert make_instance("dirichlet", 3, 2, 1).vocab_size == 3
    g = torch.Generator().manual_seed(0)
    inst = st.random_instance(3, 2, 1)
    with pytest.raises(SizeLimitError, match="1,000,000,000,000 trees"):
        draft_trees(inst, (2, 1), "iid", 10**12, g)
    for rows in (-2, 0, 2.5):
        with pytest.raises(OptionError, match="rows"):
            draft_trees(inst, (2, 1), "iid", rows, g)
    assert draft_trees(inst, (2, 1), "iid", 5, g) is not None


def test_switches_given_in_python_are_booleans():
    """'no' is a truthy string: analyze(symmetric='no') ran the symmetric enumeration, laws='no'
    kept the laws, random_instance(context_independent='no') made a context-independent
    instance, set_threads('2') took text. Each is refused; True, False (and None where allowed)
    pass."""
    inst = st.random_instance(3, 2, 1)
    for call, name in ((lambda: st.analyze(inst, "token", symmetric="no"), "symmetric"),
                       (lambda: st.analyze(inst, "token", laws="no"), "laws"),
                       (lambda: st.analyze(inst, "token", progress="yes"), "progress"),
                       (lambda: st.random_instance(3, 2, 1, context_independent="no"),
                        "context_independent"),
                       (lambda: st.set_threads("2"), "threads")):
        with pytest.raises(OptionError, match=name):
            call()
    assert st.analyze(inst, "token", laws=False).output_law is None
    assert st.analyze(inst, "token", laws=np.bool_(True)).output_law is not None
    assert not st.random_instance(3, 2, 1, context_independent=False).target.context_independent


def test_the_kl_frontier_refuses_a_solver_that_cannot_solve_it():
    """--kl with --solver highs silently solved with cvxpy; the conflict is now refused."""
    from spectheory.lp.frontier import frontier_lp
    from spectheory.lp.result import LPError

    inst = st.random_instance(2, 1, 1)
    with pytest.raises(LPError, match="solver 'highs' cannot"):
        frontier_lp(inst, kl=0.1, solver="highs")
    pytest.importorskip("cvxpy")
    assert frontier_lp(inst, kl=0.1).solver == "cvxpy"


@pytest.mark.parametrize("rows, words", [
    (torch.tensor([[1.5, 1.5]]), "row 0 of the rows given is not a distribution"),
    (torch.tensor([[.5, .5], [np.nan, 1.]]), "row 1 of the rows given is not a distribution"),
    (torch.zeros(2, 0), "R, V >= 1"), (torch.zeros(0, 3), "R, V >= 1")])
def test_check_proposal_blames_the_rows_it_was_given_not_the_sampler(rows, words):
    """Proposal rows that are not distributions were reported as the draft sampler's fault
    ("reported a q that is not a distribution"), and empty ones divided by zero; they are the
    caller's, refused before the sampler is called."""
    from spectheory.testing import check_proposal

    calls = []

    def sampler(q, generator=None):
        calls.append(1)
        return torch.zeros(q.shape[0], dtype=torch.long)

    with pytest.raises(SpectheoryError, match=words.replace("(", r"\(")):
        check_proposal(sampler, instances=[rows])
    assert not calls


def test_random_rational_models_are_sized_before_they_are_drawn():
    """random_rational_model(rng, 10, 30, 3) drew 10^31 exact entries (it hung); it is refused
    first, and so are V = 0 and non-integers; small models are drawn as before."""
    from spectheory.inputs.hetero_pairs import random_rational_model
    from spectheory.runtime.errors import InstanceError

    rng = np.random.default_rng(0)
    with pytest.raises(SizeLimitError, match=r"10\^31"):
        random_rational_model(rng, 10, 30, 3)
    for args in ((0, 2, 3), (3, 2.5, 3), (3, 2, 0)):
        with pytest.raises(InstanceError):
            random_rational_model(rng, *args)
    m = random_rational_model(rng, 3, 2, 3)
    assert m.depth == 2 and all((t.sum(axis=1) == 1).all() for t in m.tables)


def test_an_instance_file_too_large_to_parse_here_is_refused_before_parsing(tmp_path,
                                                                           monkeypatch):
    """Parsing JSON takes about 12 bytes of memory per byte of the file (a 200 MB file took
    2.4 GB); a file whose parse would not fit in this machine's memory was parsed until memory
    ran out. It is refused first, naming the file and its size: here with the per-byte cost
    raised so that a small file stands for a large one."""
    from spectheory.inputs import instances

    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1)))
    assert instances.load_instance(path).vocab_size == 3
    monkeypatch.setattr(instances, "PARSE_BYTES_PER_BYTE", 10**12)
    with pytest.raises(SizeLimitError, match="reading the instance .* bytes"):
        instances.load_instance(path)


def test_a_long_audit_says_its_estimate_first_and_takes_a_time_limit(monkeypatch, capsys):
    """`audit --block 100` ran 50 s without a word (and had no --time-limit): an audit
    estimated past 30 s notes its size and estimate on stderr before it starts (here with the
    throughput lowered so that a small audit stands for a long one), and --time-limit bounds
    it."""
    from spectheory.cli import audit

    monkeypatch.setattr(audit, "AUDIT_ENTRIES_PER_SECOND", 1.0)
    code, out, err = run(["audit", "--block", "2", "--vocab", "100", "--rows", "flat"], capsys)
    assert code == 0, err
    assert "note: audit: 1 row kinds x 3 dtypes of B K (L+1) V = 1,200 entries" in err
    monkeypatch.setattr(audit, "AUDIT_ENTRIES_PER_SECOND", 1e12)
    code, out, err = run(["audit", "--block", "2", "--vocab", "100", "--rows", "flat"], capsys)
    assert code == 0 and "note" not in err
    code, out, err = run(["audit", "--block", "2", "--vocab", "100", "--time-limit", "0"],
                         capsys)
    refused(code, out, err, "--time-limit")


def test_small_refusals_and_recoveries(tmp_path, capsys):
    """context_independent refuses rows that are not numbers (numpy's ValueError before);
    the report's random section wraps its five seeds past 2^63 - 1 (it failed on a seed the
    user did not type); `figures --only` over a figures.json that is not a record (a list) writes
    the record afresh (a TypeError before)."""
    import json
    import types

    from spectheory.cli import report
    from spectheory.inputs.models import context_independent
    from spectheory.runtime.errors import InstanceError

    with pytest.raises(InstanceError, match="context_independent"):
        context_independent(["1/2", "1/4", "1/4"])
    with pytest.raises(InstanceError, match="shape \\[1, 2\\]"):
        context_independent([[.5, .5]])
    checks = report.Checks()
    lines = report.section_random(types.SimpleNamespace(seed=2**63 - 1), checks)
    seeds = [int(line.split()[3]) for line in lines[1:6]]
    assert seeds == [2**63 - 1, 0, 1, 2, 3] and not checks.failed
    out = tmp_path / "figs"
    out.mkdir()
    (out / "figures.json").write_text("[1, 2]")
    code, _, err = run(["figures", "--out", str(out), "--quick", "--only", "fig3_tau_pmf"], capsys)
    assert code == 0, err
    record = json.loads((out / "figures.json").read_text())
    assert set(record) == {"meta", "fig3_tau_pmf"}


def test_a_guarded_child_ends_with_its_parent_even_on_sigkill(tmp_path):
    """A sweep's or figure grid's job runs in a forked child (`spectheory.sweep.guard`); a
    SIGKILL of the command (a CI runner's time-out, the OOM killer) runs no clean-up, and the
    child went on computing, orphaned, until its job ended (a full figure grid's LP went on for
    minutes). The child now ends with its parent (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import time\n"
        "from spectheory.sweep.guard import _Guarded\n"
        "class Job:\n    time_limit = 600\n    memory_limit_mb = 0\n"
        "g = _Guarded([Job()], lambda job: time.sleep(300))\n"
        "print(g.proc.pid, flush=True)\n"
        "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the guarded child outlived its SIGKILLed parent"
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# ----------------------------------------------------------------------------- --tol and --exact


@pytest.mark.parametrize("command", [
    ["exact", "--verifier", "block"], ["check", "--verifier", "token"],
    ["lp", "--problem", "direct", "--paths", "2"], ["tree", "--tree", "1,1"],
    ["hetero", "--scheme", "slem"],
])
def test_a_row_tolerance_under_exact_is_refused(tmp_path, capsys, command):
    """``--tol`` is a tolerance on float rows' sums; under ``--exact`` rows must sum to exactly 1
    and the tolerance was silently dropped. It is refused, before the file is read; without
    ``--exact`` the same tolerance is taken."""
    from spectheory.inputs.hetero_pairs import hetero_pair
    from spectheory.inputs.tokenizers import hetero_to_dict

    inst = hetero_to_dict(hetero_pair("chars-vs-merges", 0, n_tokens=2)) \
        if command[0] == "hetero" else instance_to_dict(st.random_instance(3, 2, 1, denominator=8))
    path = write(tmp_path, inst)
    code, out, err = run([command[0], path, *command[1:], "--exact", "--tol", "1e-4"], capsys)
    refused(code, out, err, "--tol 0.0001 applies to float mode", "drop --tol or --exact")
    code, out, err = run([command[0], "/nonexistent.json", *command[1:], "--exact", "--tol",
                          "1e-4"], capsys)
    refused(code, out, err, "--tol 0.0001 applies to float mode")  # before the file is read
    code, out, err = run([command[0], path, *command[1:], "--tol", "1e-4"], capsys)
    assert code == 0 and out, err
    code, out, err = run([command[0], path, *command[1:], "--exact"], capsys)
    assert code == 0 and out, err


# ----------------------------------------------------------------------------- options that do nothing


def test_options_a_command_would_ignore_are_refused(tmp_path, capsys):
    """Each of these was accepted and ignored: --lossless-tol under --exact (the JSON said
    tolerance 0), --drafting with --stop (one path), claims --json with --markdown (markdown
    printed), a sweep run's plot options and a plot's run options, a file after --example."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)))
    cases = [
        (["check", path, "--exact", "--verifier", "lenient", "--lossless-tol", "1e-3"],
         "--lossless-tol 0.001 applies to float mode"),
        (["exact", path, "--stop", "coin(1/2)", "--drafting", "norep"],
         "--stop does not combine with --drafting"),
        (["claims", "--json", "--markdown"], "--markdown and --json are two forms"),
        (["sweep", str(tmp_path / "s.toml"), "--figure", str(tmp_path / "x.png")],
         "--figure applies to 'sweep plot OUT', not to a run"),
        (["sweep", str(tmp_path / "s.toml"), "--x", "vocab"],
         "--x applies to 'sweep plot OUT', not to a run"),
        (["sweep", "plot", str(tmp_path / "out"), "--executor", "ray", "--no-cache"],
         "--executor, --no-cache apply to a run, not to 'sweep plot OUT'"),
        (["sweep", "--example", str(tmp_path / "s.toml")],
         "--example prints the example file and reads nothing else"),
    ]
    for argv, words in cases:
        refused(*run(argv, capsys), words)
    assert not (tmp_path / "x.png").exists()
    # the same options where they act
    code, out, err = run(["check", path, "--verifier", "lenient", "--lossless-tol", "1e-3",
                          "--json"], capsys)
    assert code == 1 and '"tolerance": 0.001' in out, err
    code, out, _ = run(["sweep", "--example"], capsys)
    assert code == 0 and "[[instances]]" in out


@pytest.mark.parametrize("argv,option", [
    (["exact", "{path}", "--sampling", "temperature=0", "--sampling", "top_k=2"], "--sampling"),
    (["exact", "{path}", "--verifier", "token", "--verifier", "block"], "--verifier"),
    (["hetero", "{path}", "--scheme", "tli", "--scheme", "slem"], "--scheme"),
    (["check-sampler", "x:y", "--samples", "100", "--samples", "200"], "--samples"),
])
def test_an_option_given_twice_is_refused(tmp_path, capsys, argv, option):
    """The second value replaced the first silently (greedy dropped from the JSON)."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)))
    code, out, err = run([a.format(path=path) for a in argv], capsys)
    refused(code, out, err, f"{option} given twice; give it once")
    code, out, err = run(["exact", path, "--sampling", "temperature=0", "--verifier", "token"],
                         capsys)
    assert code == 0 and out, err


@pytest.mark.parametrize("argv,words", [
    (["exact", "{path}", "--sampling", "top_k=" + "9" * 5000],
     "sampling parameter top_k = '999"),
    (["exact", "{path}", "--sampling", "min_tokens=1,stop_token_ids=" + "7" * 1400],
     "has a number of 1,400 digits (at most 1000)"),
    (["exact", "{path}", "--sampling", "TEMPERATURE=0.5"],
     "unknown sampling parameter 'TEMPERATURE'; keys are lower case: 'temperature'"),
    (["audit", "--vocab", "1000000000000"], "use a smaller vocabulary (--vocab)"),
    (["audit", "--block", "1000"], "use a smaller block length (--block)"),
    (["audit", "--batch", "100000"], "use a smaller batch (--batch)"),
])
def test_messages_name_the_cause(tmp_path, capsys, argv, words):
    """A 5,000-digit top_k was 'invalid sampling parameters value' (Python's own digit limit,
    648 characters of it echoed); an upper-case key was matched to 'top_p'; every audit too large
    advised a smaller batch, also for a vocabulary of 10^12."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)))
    code, out, err = run([a.format(path=path) for a in argv], capsys)
    refused(code, out, err, words)
    assert len(err) < 400, err


def test_a_buffer_pool_size_past_any_machine_is_named_as_such(monkeypatch):
    from spectheory.runtime.errors import OptionError
    from spectheory.runtime.limits import parse_bytes

    with pytest.raises(OptionError, match=r"is over the largest size taken, 15 digits"):
        parse_bytes("9" * 26)
    with pytest.raises(OptionError, match=r"is not a size in bytes"):
        parse_bytes("12Q")
    assert parse_bytes("512M") == 512 * 2**20


# ----------------------------------------------------------------------------- messages and sizes
# of the stateful checks: each line names the real rule, the real limit and the caller's terms


def test_an_adaptive_rule_value_of_thousands_of_digits_is_refused_as_user_code():
    """A stopping rule returning Fraction(1, 10^5000) gave a report whose summary raised
    Python's 4,300-digit ValueError (and 10^2,000,000 kept the analysis adding Fractions for
    minutes): exact rule values have at most MAX_RULE_DIGITS digits."""
    from fractions import Fraction

    from spectheory.engine.adaptive import MAX_RULE_DIGITS, analyze_adaptive
    from spectheory.runtime.errors import UserCodeError

    inst = st.random_instance(3, 2, 5, denominator=12).to_exact()
    with pytest.raises(UserCodeError, match=r"returned a Fraction of about 5,001 digits; the "
                                            r"exact analysis takes rule values of at most 100 "):
        analyze_adaptive(inst, "block", lambda s, q, p: Fraction(1, 10**5000))
    assert MAX_RULE_DIGITS == 100
    edge = Fraction(1, 10**100 - 1)  # 100 digits of denominator: the largest kept
    assert "E[tau+1]" in analyze_adaptive(inst, "block", lambda s, q, p: edge).summary()
    with pytest.raises(UserCodeError, match="about 101 digits"):
        analyze_adaptive(inst, "block", lambda s, q, p: Fraction(1, 10**100))


def _past_the_limit(then, monkeypatch):
    """A user call that returns just past the running time limit, then ``then()``, with the
    limit's backstop alarm made to do nothing: the check between calls must stop the run, and
    no pause of the machine can let the backstop fire inside the call or before it instead (it
    would name the call, or no place). A second call past the limit means nothing stopped the
    run: it raises, and the test fails."""
    import time as _time

    from spectheory.runtime import limits

    monkeypatch.setattr(limits, "_on_alarm", lambda signum, frame: None)
    calls = [0]

    def call(*args, **kwargs):
        calls[0] += 1
        if calls[0] > 1:
            raise RuntimeError("the check went on past its time limit")
        while limits.remaining() > 0:
            _time.sleep(0.01)
        return then(*args, **kwargs)

    return call


def test_a_time_limit_in_a_step_check_says_where_and_what_to_lower(monkeypatch):
    """"...reached after 20.2 scheck_step; ... or use a smaller instance": the place ran into the
    time, and the advice named the instance where the samples are the size."""
    from spectheory.runtime import limits
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing import check_step, vllm_v1_step

    step = _past_the_limit(vllm_v1_step, monkeypatch)  # (before the limit: its backstop quiet)
    with pytest.raises(TimeLimitError) as exc, limits.running(0.5):
        check_step(step, samples=10**7)
    assert " s in check_step; stopped with no result: raise --time-limit or use fewer samples" \
        in str(exc.value), str(exc.value)


def test_a_proposal_check_refusal_names_only_what_the_caller_can_change(monkeypatch):
    """check_proposal's run-time refusal advised "raise max_seconds, or let samples='auto' with
    budget_s size the run": check_proposal takes neither (a TypeError, and 'auto' refused)."""
    import time as _time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing import check_proposal
    from spectheory.testing.checks import calls

    monkeypatch.setattr(calls, "PROJECT_AFTER_S", 0.3)

    def slow(q, generator):  # 25 us a row: 10^12 samples project to months
        _time.sleep(q.shape[0] * 2.5e-5)
        return q.argmax(-1), q

    with pytest.raises(TimeLimitError) as exc:
        check_proposal(slow, samples=10**12)
    text = str(exc.value)
    assert text.endswith("over check_proposal's bound of 24.0 h; lower samples"), text
    assert "max_seconds" not in text and "budget_s" not in text
    from spectheory.runtime import limits

    def argmax(q, generator):
        return q.argmax(-1), q

    sampler = _past_the_limit(argmax, monkeypatch)  # (before the limit: its backstop quiet)
    with pytest.raises(TimeLimitError) as exc, limits.running(0.5):  # named as itself
        check_proposal(sampler, samples=10**9)
    assert " s in check_proposal; stopped with no result: raise --time-limit or use fewer " \
        "samples" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("sampling, rule", [
    ("repetition_penalty=1e7", "repetition_penalty is a number in (0, 1e+06]"),
    ("presence_penalty=-2e6", "presence_penalty is a number in [-1e+06, 1e+06]"),
    ("min_tokens=2000000;stop_token_ids=0", "min_tokens is an integer in 0..1,000,000"),
    ("no_repeat_ngram_size=1000001", "no_repeat_ngram_size is an integer in 0..1,000,000")])
def test_a_penalty_or_count_past_its_bound_names_the_bound(tmp_path, capsys, sampling, rule):
    """repetition_penalty = 1e7 was refused as out of range of "a finite number > 0", which 1e7
    is: the rule stated is now the one applied (MAX_PENALTY, MAX_COUNT)."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 5, denominator=12)))
    refused(*run(["exact", path, "--verifier", "block", "--sampling", sampling], capsys), rule)


def test_an_exact_flag_that_is_not_a_bool_is_an_option_error():
    """analyze(exact='yes') raised SizeLimitError: the flag is an option, not a size."""
    with pytest.raises(OptionError, match=r"^exact = 'yes' must be True or False$"):
        st.analyze(st.random_instance(3, 2, 7), "block", exact="yes")
    with pytest.raises(OptionError, match=r"max_sequences = 'x' must be a positive integer"):
        check_size(10, "leaves", exact=False, limit="x")


def test_hf_min_new_tokens_past_its_bound_is_named_as_given():
    """min_new_tokens = 10^30 was refused as "sampling parameter min_tokens ... an integer >= 0
    (with stop_token_ids)": the kit's names, and a rule the value meets."""
    pytest.importorskip("transformers")
    from spectheory.testing import check_hf_generate

    with pytest.raises(OptionError, match=r"^min_new_tokens = 10{30} must be an integer in "
                                          r"0\.\.1,000,000$"):
        check_hf_generate(samples=300, tokens=2,
                          generate_kwargs={"min_new_tokens": 10**30, "eos_token_id": 0})


def test_a_rule_parameter_in_scientific_notation_is_its_exact_value(tmp_path, capsys):
    """--stop 'coin(1e-3)' was refused as "not a non-negative decimal or fraction": the
    parameter is read as the exact decimal, the same analysis as coin(1/1000). An exponent
    past the rules' 100 digits is refused before the number is built (1e-999999999 would be a
    billion-digit Fraction)."""
    import json

    from spectheory.engine.adaptive import parse_rule

    assert parse_rule("coin(1e-3)").name == parse_rule("coin(1/1000)").name == "coin(1/1000)"
    assert parse_rule("target-peek(2.5E+2)").name == "target-peek(250)"
    assert parse_rule("coin(1e-99)").name == f"coin(1/{10**99})"  # 100 digits: the bound
    assert parse_rule("coin(0e-999)").name == parse_rule("coin(0.0e141)").name == "coin(0)"
    assert parse_rule("coin(0e-9999999999999999999999999999999)").name == "coin(0)"  # at once
    assert parse_rule("target-peek(0.000000000000000000001e110)").name == \
        f"target-peek({10**89})"  # the value's digits count, not the exponent's
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1, denominator=60)),
                 "exact.json")
    outs = []
    for rule in ("coin(1e-3)", "coin(1/1000)"):
        code, out, err = run(["exact", path, "--verifier", "token", "--stop", rule, "--exact",
                              "--json"], capsys)
        assert code == 0, err
        outs.append(json.loads(out))
    assert outs[0] == outs[1]
    for rule in ("target-peek(1e100)", "coin(1e-100)", "coin(0.0000000000000000000001e-80)",
                 "coin(1e-999999999)"):
        refused(*run(["exact", path, "--verifier", "token", "--stop", rule], capsys),
                "is an exact value of more than 100 digits; the rules take at most 100")


def test_a_toolkit_refusal_inside_user_code_names_the_user_code(user_modules, capsys):
    """A sampler that called a toolkit function with a bad argument got the toolkit's refusal
    passed through as if the check itself refused ("vocab_size = 0 is out of range", exit 2 and
    no word of the sampler). It is now the sampler's error, in the sampler's name, with the
    toolkit's words; the toolkit's own refusals around a user call keep their words."""
    from spectheory.runtime.errors import InstanceError, UserCodeError, call_user
    from spectheory.testing import check_sampler, make_sampler

    def calls_the_kit_wrongly(drafts, q, p, generator):
        st.random_instance(0, 2, 1)

    with pytest.raises(UserCodeError) as exc:
        check_sampler(calls_the_kit_wrongly, "token", samples=200)
    text = str(exc.value)
    assert "calls_the_kit_wrongly raised InstanceError: vocab_size = 0 is out of range" in text
    assert isinstance(exc.value.__cause__, InstanceError) and "\n" not in text
    with pytest.raises(InstanceError) as exc:  # the toolkit's function itself: its own refusal
        call_user(st.random_instance, 0, 2, 1, what="a kit function")
    assert not isinstance(exc.value, UserCodeError)
    assert check_sampler(make_sampler("token"), "token", samples=4000).passed  # control
    (user_modules / "kitcaller.py").write_text("import spectheory as st\n\n"
                                               "def sampler(drafts, q, p, generator):\n"
                                               "    return st.random_instance(1, 2, 1)\n")
    code, out, err = run(["check-sampler", "kitcaller:sampler", "--verifier", "token",
                          "--samples", "200"], capsys)
    refused(code, out, err, "kitcaller:sampler raised InstanceError: vocab_size = 1")


def _hang_for(seconds: float) -> None:
    """A user call that does not return, in short sleeps (a watchdog's alarm interrupts it);
    past ``seconds`` it raises instead, so a test whose watchdog failed fails instead of
    hanging."""
    import time as _time

    give_up = _time.monotonic() + seconds
    while _time.monotonic() < give_up:
        _time.sleep(0.005)
    raise RuntimeError(f"nothing stopped this call in {seconds} s")


def test_a_callers_max_seconds_bounds_a_sampler_call_that_never_returns(monkeypatch):
    """check_sampler(max_seconds=...) projected the run from calls that returned, so a sampler
    call that never returned held the check for ever; a budgeted run had a watchdog, an
    explicit max_seconds none. Now a call still running at twice max_seconds plus 1 s is
    stopped in one line naming the sampler."""
    import time as _time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing import check_sampler, make_sampler

    from spectheory.testing.checks import calls as C

    monkeypatch.setattr(C, "PROJECT_AFTER_S", 1e9)  # the pace out of the way: the bound alone
    token = make_sampler("token")
    calls = [0]

    def hangs_on_its_third_call(drafts, q, p, generator):
        calls[0] += 1
        if calls[0] == 3:
            _hang_for(6)
        return token(drafts, q, p, generator)

    start = _time.monotonic()
    with pytest.raises(TimeLimitError) as exc:
        check_sampler(hangs_on_its_third_call, "token", samples=20_000, max_seconds=0.1,
                      max_batch=2_000)
    took = _time.monotonic() - start
    assert "hangs_on_its_third_call) did not return" in str(exc.value), str(exc.value)
    assert "did not return: the call was stopped after " in str(exc.value)
    assert str(exc.value).endswith(" s, past 2 times max_seconds = 0.1 plus 1 s (1.2 s); a "
                                   "call of the code under test must return")
    assert 1.1 < took < 5.5, took  # (the hang gives up at 6 s)
    # control: the bound is one call's, not the run's. Calls of 30 ms that return, for longer
    # than the 1.6 s bound of max_seconds = 0.3 in all, are not stopped by it (the pace, which
    # bounds the run from its rate, is kept from projecting here)
    n = [0]

    def returns_in_30_ms(drafts, q, p, generator):
        n[0] += 1
        _time.sleep(0.03)
        return token(drafts, q, p, generator)

    start = _time.monotonic()
    assert check_sampler(returns_in_30_ms, "token", samples=36_000, max_seconds=0.3,
                         max_batch=500).passed
    assert _time.monotonic() - start > 1.7 and n[0] >= 60, n



def test_a_budgeted_check_that_runs_long_on_a_slow_machine_is_not_called_a_hang(monkeypatch):
    """The budget's watchdog stopped the whole check at twice the budget plus 1 s, so on a
    loaded machine a sampler whose calls all returned was stopped mid-call as one that "did not
    return". It bounds each call now: here six of the main run's calls take 0.4 s each (as if
    the machine slowed after the pilots), 2.4 s in all, past the 2 s bound of a 0.5 s budget,
    and the check ends (a call may pause 1.6 s more). The plan is fixed (one pilot, then 600
    samples in calls of 100), so that the machine's speed cannot change how many calls there
    are."""
    import time as _time

    from spectheory.testing import check_sampler, make_sampler
    from spectheory.testing.statistics import budget as B

    token = make_sampler("token")
    main, slow = [False], [0]

    def planned(run, budget_s, minimum, **kwargs):
        result, inside = run(minimum)
        main[0] = True  # the pilot is over
        return {"samples": 600, "fixed_s": 0.0, "per_sample_s": 1e-4, "sampler_s": 1e-4,
                "kit_s": 0.0, "pilot": [(minimum, inside)], "kit_pilot": [], "result": result}

    monkeypatch.setattr(B, "size_run", planned)

    def slows_in_the_main_run(drafts, q, p, generator):
        if main[0] and slow[0] < 6:
            slow[0] += 1
            _time.sleep(0.4)
        return token(drafts, q, p, generator)

    start = _time.monotonic()
    rep = check_sampler(slows_in_the_main_run, "token", samples="auto", budget_s=0.5,
                        max_batch=100)
    assert slow[0] == 6 and _time.monotonic() - start > 2.4
    assert rep.samples == rep.budget.samples == 600  # the planned run, to its end
    assert rep.p_value > 0.001 or rep.needs_samples > rep.samples  # a correct sampler: no
    # failure (or a run too small to test)


def test_whose_code_raised_a_toolkit_error_is_read_from_the_modules_of_its_frames():
    """Which toolkit errors inside a user call are the user code's (`_through_user_code`):
    - a user's verifier that runs ``validate_law`` on its own result still gets the check's
      verdict, not a refusal: "not a law" is a verdict's signal, whoever raises it;
    - a toolkit check that reaches the user's objects through generated code (a dataclass's
      ``__init__``, file ``<string>``) stays the toolkit's refusal: a one-node tree graph is
      the input's fault, not its nodes' hash or repr;
    - code typed at ``python -`` or ``python -c`` (files ``<stdin>``, ``<string>``) and an
      installed package are the user's; the toolkit's sub-packages, whose files lie outside
      ``spectheory/`` in a source checkout, and Python's library are not."""
    import functools

    import torch

    from spectheory.law import LawError, validate_law
    from spectheory.runtime.errors import InputError, UserCodeError, call_user
    from spectheory.testing.checks.lossless import check_lossless_battery

    def checks_itself(drafts, q, p):
        B, L = drafts.shape
        stop = torch.full((B, 1, L + 1), 2.0 / (L + 1), dtype=torch.float64)  # sums to 2
        corr = torch.full((B, 1, L + 1, q.shape[-1]), 1.0 / q.shape[-1], dtype=torch.float64)
        validate_law((stop, corr), B, 1, L, q.shape[-1], exact=False)
        return stop[:, 0], corr[:, 0]

    rep = check_lossless_battery(checks_itself, [st.random_instance(3, 2, 1)])[0]
    assert rep.lossless is False and isinstance(rep.law_error, LawError)
    assert rep.law_error.kind == "stop-sum"

    nx = pytest.importorskip("networkx")
    from spectheory.engine.drafttrees import tree_shape

    g = nx.DiGraph()
    g.add_node("root")
    with pytest.raises(InputError, match="a tree shape needs at least one drafted node") as exc:
        tree_shape(g)
    assert not isinstance(exc.value, UserCodeError), str(exc.value)

    for where in ("<stdin>", "<string>"):  # python - < file, python -c "..."
        scope = {"__name__": "__main__", "st": st}
        exec(compile("def sampler(drafts, q, p, generator):\n"
                     "    return st.random_instance(0, 2, 1)\n", where, "exec"), scope)
        with pytest.raises(UserCodeError, match=r"sampler raised InstanceError: vocab_size = 0"):
            call_user(scope["sampler"], None, None, None, None)
    from spectheory.toy_models import families

    with pytest.raises(InputError) as exc:  # the toolkit's own, wherever its files lie
        call_user(families.dirichlet, vocab_size=1, block_length=2, what="a toolkit family")
    assert not isinstance(exc.value, UserCodeError), str(exc.value)
    through_library = functools.singledispatch(st.random_instance)  # a functools frame between
    with pytest.raises(InputError) as exc:
        call_user(through_library, 0, 2, 1, what="a toolkit function")
    assert not isinstance(exc.value, UserCodeError), str(exc.value)


def test_a_callers_max_seconds_bounds_a_tree_sampler_call_that_never_returns():
    """check_tree_sampler takes max_seconds as check_sampler does, and bounds a call that never
    returns the same way (it waited for ever)."""
    import functools
    import time as _time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks.tree import check_tree_sampler
    from spectheory.testing.checks.tree_ports import (EAGLE_POSTERIOR, evaluate_posterior,
                                                      tree_engine_sampler)

    eagle = tree_engine_sampler(evaluate_posterior, EAGLE_POSTERIOR)
    calls = [0]

    @functools.wraps(eagle)
    def hangs_on_its_second_call(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            _hang_for(6)
        return eagle(*args, **kwargs)

    start = _time.monotonic()  # 400 samples in calls of 200: the first call's pace projects
    with pytest.raises(TimeLimitError, match=r"did not return: the call was stopped after .* "
                                             r"past 2 times max_seconds = 0.5 plus 1 s"):
        check_tree_sampler(hangs_on_its_second_call, tree=(2, 1), samples=400, max_batch=200,
                           max_seconds=0.5)  # far below 0.5 s; the second call hangs
    assert 1.9 < _time.monotonic() - start < 5
    calls[0], start = 0, _time.monotonic()  # a budgeted run: its pilots' calls alike, by
    # the budget's bound (a tree check had none without max_seconds)
    with pytest.raises(TimeLimitError, match=r"did not return: the call was stopped after .* "
                                             r"past 2 times the budget of 0.5 s plus 1 s"):
        check_tree_sampler(hangs_on_its_second_call, tree=(2, 1), samples="auto", budget_s=0.5)
    assert 1.9 < _time.monotonic() - start < 5


def test_a_call_bound_keeps_an_earlier_time_limit(monkeypatch):
    """Under a time limit whose backstop comes later than the call bound of max_seconds, the
    call bound armed itself per call and held the time limit off: a call that began late ran
    past the limit until its own bound. Both stop the run now, whichever comes first."""
    import time as _time

    from spectheory.runtime import limits
    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing import check_sampler, make_sampler
    from spectheory.testing.checks import calls as C

    monkeypatch.setattr(C, "PROJECT_AFTER_S", 1e9)  # the pace out of the way
    token = make_sampler("token")
    calls = [0]

    def slow_then_hangs(drafts, q, p, generator):
        calls[0] += 1
        if calls[0] == 1:
            _time.sleep(0.7)
            return token(drafts, q, p, generator)
        _hang_for(6)

    start = _time.monotonic()  # the limit's backstop at 1.5 s; the call bound at 1.2 s a call
    with pytest.raises(TimeLimitError) as exc, limits.running(1.0):
        check_sampler(slow_then_hangs, "token", samples=20_000, max_seconds=0.1,
                      max_batch=2_000)
    assert str(exc.value).startswith("time limit of 1 s reached"), str(exc.value)
    assert _time.monotonic() - start < 5  # (the hang gives up at 6.7 s)


def test_a_users_package_named_like_a_library_module_is_the_users(tmp_path, monkeypatch):
    """A user's top-level package that shares a name with a module of Python's library (code,
    token, profile) was read as the library's, so the toolkit's refusal of what its sampler
    passed passed through unattributed. The library's own modules lie in its folders."""
    import sys

    from spectheory.runtime.errors import UserCodeError, call_user

    package = tmp_path / "code"  # `code` is a module of Python's library
    package.mkdir()
    (package / "__init__.py").write_text("import spectheory as st\n\n"
                                         "def sampler(drafts, q, p, generator):\n"
                                         "    return st.random_instance(0, 2, 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    library_code = sys.modules.pop("code", None)
    try:
        import code

        assert code.__file__.startswith(str(tmp_path))
        with pytest.raises(UserCodeError,
                           match=r"code:sampler raised InstanceError: vocab_size = 0"):
            call_user(code.sampler, None, None, None, None)
    finally:  # the library's module back (or none, as before)
        sys.modules.pop("code", None)
        if library_code is not None:
            sys.modules["code"] = library_code


def test_an_earlier_alarm_is_delivered_once_and_a_quiet_one_keeps_the_watch():
    """The call bound's watchdog and an alarm armed before it (a time limit's backstop, a
    user's own timer) that comes later than the watchdog's first look: the earlier alarm's
    handler runs once, when its time comes (it ran again just after the block, inside the
    caller's cleanup), and a handler that returns leaves the watch on (it switched it off: a
    call that hung was never stopped)."""
    import signal
    import time as _time

    from spectheory.runtime.errors import TimeLimitError
    from spectheory.testing.checks import calls as C
    from spectheory.testing.checks.report import guarded

    class OuterLimit(TimeLimitError):
        pass

    def hang():
        _hang_for(3)

    for kind in ("raising", "quiet"):
        seen = []

        def handler(signum, frame, kind=kind):
            seen.append((kind, _time.monotonic()))
            if kind == "raising":
                raise OuterLimit("the earlier limit")

        old = signal.signal(signal.SIGALRM, handler)
        try:
            start = _time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.5)  # later than the watchdog's 0.3 s
            with pytest.raises(TimeLimitError) as exc:
                with C._watchdog(0.3, "max_seconds = x"):
                    _time.sleep(0.4)  # the check's own work: the call begins at 0.4 s
                    guarded(hang, "sampler")()  # its bound at 0.7 s, the earlier alarm at 0.5
            _time.sleep(0.1)  # after the block: nothing more may fire
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        assert len(seen) == 1 and 0.45 < seen[0][1] - start < 2.5, seen  # (the hang gives up
        # at 3.4 s; the handler's count and the error's type carry the order)
        if kind == "raising":
            assert isinstance(exc.value, OuterLimit)
        else:
            assert "did not return: the call was stopped after" in str(exc.value)
            assert _time.monotonic() - start < 2.5


def test_a_float32_law_is_refused_a_verdict_within_its_own_rounding():
    """block verification computed in float64 and handed back in float32 (its rows still sum to 1
    within the law check's 1e-9 on this instance): TV 5.6e-9 is float32 rounding, not a loss, so
    no LOSSY verdict names an offending sequence; a generous tolerance still says lossless, and a
    lossy float32 law (all mass on token 0, exact in float32) is still LOSSY."""
    def f32(d, q, p):
        law = st.block_verification(d, q, p)
        return st.Law(law.stop.float(), law.correction.float())

    inst = st.random_instance(3, 2, 0)
    with pytest.raises(SpectheoryError, match="rounding of the verifier's float32 law"):
        st.check_lossless(f32, inst)
    assert st.check_lossless(f32, inst, tol=1e-6).lossless

    def greedy0(d, q, p):
        stop = torch.zeros(d.shape[0], d.shape[1] + 1, dtype=torch.float32)
        stop[:, 0] = 1
        corr = torch.zeros(p.shape, dtype=torch.float32)
        corr[..., 0] = 1
        return st.Law(stop, corr)

    rep = st.check_lossless(greedy0, inst)
    assert not rep.lossless and rep.tv > 0.5

    from spectheory.verifiers.gbv import gbv

    def gbv32(d, q, p):  # K paths: the enumeration accepts it by a cheaper test than the check
        law = gbv(d, q, p)
        return st.Law(law.stop.float(), law.correction.float())

    with pytest.raises(SpectheoryError, match="rounding of the verifier's float32 law"):
        st.check_lossless(gbv32, inst, paths=2, route="enumerate")


def test_exact_tables_of_plain_integers_compute_in_fractions():
    """An exact instance built in Python from object arrays of ints (a documented entry type):
    p / q of two ints is a float, and the law was refused as "not a Fraction", blamed on the
    built-in verifier. The tables are read as Fractions (copies; the caller's arrays are kept)."""
    from fractions import Fraction

    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel

    t = np.array([[0, 1]], dtype=object)
    q = np.array([[1, 0]], dtype=object)
    for L, verifier in ((1, "token"), (2, "block"), (2, "token")):
        inst = Instance(2, L, TableModel(2, (t,)), TableModel(2, (q,)))
        res = st.analyze(inst, verifier)
        assert res.block_efficiency == 1 and isinstance(res.block_efficiency, Fraction)
        assert st.check_lossless(verifier, inst).lossless
    assert type(t[0, 1]) is int  # the caller's table untouched
    inst = Instance(2, 2, TableModel(2, (t,)), TableModel(2, (t.copy(),)))
    assert st.analyze(inst, "token").block_efficiency == 3
    out, tgt, tv = st.multi_iteration_law(inst, "token", 4)
    assert tv == 0 and out[-1] == 1


def test_an_enumeration_past_a_raised_limit_is_weighed_against_memory(monkeypatch):
    """max_sequences raised past the default: a context-independent instance of 2^31
    sequences (L = 30) ran 37 s and ended in a MemoryError (a broadcast level copied whole). Now
    refused before the work, naming the memory; a raised limit that fits still runs."""
    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel
    from spectheory.runtime import limits

    row = lambda *v: TableModel(2, (np.array([v]),))  # noqa: E731
    small = Instance(2, 3, row(0.25, 0.75), row(0.5, 0.5))
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "4")
    assert st.analyze(small, "token", max_sequences=16).block_efficiency > 1
    # a machine of 1,000 bytes (16 sequences x 48 B is over half of it): nothing is allocated
    # past the refusal, so a defect here fails the test instead of filling the memory
    monkeypatch.setattr(limits, "physical_memory", lambda: 1000)
    with pytest.raises(SizeLimitError, match="of memory"):
        st.analyze(small, "token", max_sequences=16)
    with pytest.raises(SizeLimitError, match="of memory"):
        row(0.25, 0.75).torch_level(8)  # 512 float64 entries
    assert row(0.25, 0.75).torch_level(0).shape == (1, 2)  # the table itself: no copy


def test_meta_tensors_from_user_code_are_refused_in_one_line():
    """A verifier's law or a stopping rule's value on the meta device holds no values: they
    crashed in numpy's copy (NotImplementedError) and in .item() (RuntimeError)."""
    from spectheory.engine.adaptive import analyze_adaptive
    from spectheory.law import LawError
    from spectheory.runtime.errors import UserCodeError

    inst = st.random_instance(3, 2, 0)

    def meta_law(d, q, p):
        law = st.token_verification(d, q, p)
        return st.Law(law.stop.to("meta"), law.correction.to("meta"))

    for call in (lambda: st.analyze(inst, meta_law), lambda: st.check_lossless(meta_law, inst)):
        with pytest.raises(LawError, match="stop on the meta device"):
            call()
    with pytest.raises(UserCodeError, match="not a number"):
        analyze_adaptive(inst, "token", lambda s, q, p: torch.empty((), device="meta"))
    # the neighbours: the same values off the meta device are read
    assert analyze_adaptive(inst, "token", lambda s, q, p: torch.tensor(0.25)).block_efficiency > 1
    assert st.check_lossless(lambda d, q, p: st.token_verification(d, q, p), inst).lossless


def test_verifier_names_hetero_counts_and_block_values_read_as_their_neighbours():
    """' token ' and 'token\\n' were unknown while ' additive ( 1/4 ) ' was read; numpy integers
    were refused as the heterogeneous instances' counts (analyze takes them); a block function's
    np.float32(1.0) was refused as no probability; tli_block ran residual_over='both' as the
    correct rule."""
    from spectheory.inputs.hetero_pairs import hetero_pair
    from spectheory.inputs.tokenizers import HeteroInstance
    from spectheory.verifiers.hetero import check_hetero_lossless, tli_block

    inst = st.random_instance(3, 2, 0)
    want = st.analyze(inst, "token").block_efficiency
    for name in (" token ", "token\n", "\ttoken"):
        assert st.analyze(inst, name).block_efficiency == want
    with pytest.raises(SpectheoryError, match="unknown verifier 'TOKEN'"):
        st.analyze(inst, "TOKEN")
    pair = hetero_pair("crossed-bounds", 2)
    assert check_hetero_lossless(pair, "tli", n_tokens=np.int64(2)).lossless
    again = HeteroInstance(pair.alphabet, pair.target_tokenizer, pair.draft_tokenizer,
                           pair.target, pair.draft, np.int64(2), np.int16(3))
    rep = check_hetero_lossless(again, "tli")
    assert rep.lossless and rep.n_tokens == 3
    for value in (np.float32(1.0), 1.0, np.float64(1.0)):
        rep = check_hetero_lossless(pair.to_float(), lambda i, c, v=value: {(0,): v})
        assert not rep.lossless and abs(float(rep.tv) - 0.925) < 1e-12
    rep = check_hetero_lossless(pair, lambda i, c: {(0,): np.int64(1)})
    assert not rep.lossless and rep.tv == Fraction(37, 40)
    for bad in (np.bool_(True), np.float64("nan"), "1"):
        with pytest.raises(SpectheoryError, match="each value must be"):
            check_hetero_lossless(pair.to_float(), lambda i, c, v=bad: {(0,): v})
    with pytest.raises(OptionError, match="residual_over = 'both'"):
        tli_block(pair, (), residual_over="both")
    assert tli_block(pair, (), residual_over="target") == tli_block(pair, ())


def test_words_no_option_takes_are_blamed_on_the_command_that_read_them(tmp_path, capsys):
    """``check inst.json --stop ...`` (an option of exact, not of check) said "spectheory:
    error: ... (see spectheory --help)"; the command's own help lists its options."""
    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 1)))
    code, out, err = run(["check", path, "--stop", "target-drop(1)"], capsys)
    refused(code, out, err, "spectheory check: error: unrecognized arguments: --stop "
            "target-drop(1) (see spectheory check --help)")
    code, out, err = run(["validate", "summarize", "a", "b"], capsys)
    refused(code, out, err, "spectheory validate summarize: error: unrecognized arguments: b "
            "(see spectheory validate summarize --help)")
    code, out, err = run(["verifiers", "extra"], capsys)
    refused(code, out, err, "spectheory verifiers: error: unrecognized arguments: extra")
    # an option before the command belongs to no parser that read it: the top level is named
    code, out, err = run(["--exact", "check", path], capsys)
    refused(code, out, err, "spectheory: error: unrecognized arguments: --exact "
            "(see spectheory --help)")
    assert run(["check", path], capsys)[0] == 0  # the neighbour


def test_an_explicit_token_count_of_one_block_is_counted_over_iterations(tmp_path, capsys):
    """check_lossless(n_tokens=L+1) and ``check --tokens L+1`` read the one-block law (block
    then target sampling) while the option says "over repeated iterations" and L+2 did iterate:
    a lossy rule's TV was 1/24 where the law of its first two tokens is 1/4 off."""
    inst = st.random_instance(2, 1, 3, denominator=12)  # L = 1
    assert st.check_lossless("threshold", inst).tv == Fraction(1, 24)  # the default: one block
    iterated = st.multi_iteration_law(inst, "threshold", 2)[2]
    assert iterated == Fraction(1, 4)
    assert st.check_lossless("threshold", inst, n_tokens=2).tv == iterated
    path = write(tmp_path, instance_to_dict(inst))
    code, out, err = run(["check", path, "--verifier", "threshold", "--exact", "--tokens", "2",
                          "--json"], capsys)
    assert code == 1 and json.loads(out)["tv_to_target"] == "1/4"
    assert st.check_lossless("block", inst, n_tokens=2).lossless  # a lossless rule still is


def test_symmetric_true_is_checked_like_a_declaration():
    """symmetric=True forced the sorted enumeration of path tuples on rules that read the paths'
    order (SpecInfer, SpecTr, traversal): wrong laws, TV 7/48 for a lossless rule, with no
    word. The order is now checked on a sample as for a declared rule; an order-invariant rule
    still runs sorted and gives the default's law."""
    inst = st.random_instance(2, 3, 1, denominator=12)
    for name in ("specinfer", "spectr", "traversal-iid"):
        assert st.analyze(inst, name, paths=2).tv_to_target == 0
        with pytest.raises(SpectheoryError, match="symmetric=True was asked for"):
            st.analyze(inst, name, paths=2, symmetric=True)
    import dataclasses

    from spectheory.registry import get_verifier

    claimed = dataclasses.replace(get_verifier("specinfer"), order_invariant=True)
    with pytest.raises(SpectheoryError, match="declares order_invariant=True.*drop the "
                                              "declaration"):
        st.analyze(inst, claimed, paths=2, symmetric=True)
    sorted_ = st.analyze(inst, "gbv", paths=2, symmetric=True, route="enumerate")
    assert sorted_.block_efficiency == st.analyze(inst, "gbv", paths=2).block_efficiency


def test_a_tree_deeper_than_the_instance_is_noted(tmp_path, capsys):
    """``tree --tree 2,1,1`` on an L = 2 instance analyses a 3-deep tree (rows past the tables
    read as a Markov chain) and printed E[tau+1] = 3.37 with no word; the note says so. A tree
    within the block length gets no note."""
    path = write(tmp_path, instance_to_dict(st.random_instance(2, 2, 1)))
    code, out, err = run(["tree", path, "--tree", "2,1,1"], capsys)
    assert code == 0 and "3 tokens deep, past the instance's block length 2" in err
    assert "(at most 4)" in err
    code, out, err = run(["tree", path, "--tree", "2,1"], capsys)
    assert code == 0 and "note" not in err


def test_an_unknown_toy_parameter_is_named_with_the_familys_parameters(capsys):
    """``toy dirichlet nosuchknob=1`` said "dirichlet() got an unexpected keyword argument"
    (Python's words, no list of what the family takes)."""
    code, out, err = run(["toy", "dirichlet", "nosuchknob=1"], capsys)
    refused(code, out, err, "toy family 'dirichlet' has no parameter 'nosuchknob'",
            "its parameters are vocab_size, block_length, seed, alpha")
    assert run(["toy", "dirichlet", "vocab_size=2", "block_length=1"], capsys)[0] == 0


def test_a_cache_that_is_a_file_and_a_tolerance_of_minus_zero(tmp_path, capsys):
    """``models list --cache FILE`` listed a regular file as the cache folder (exit 0);
    ``--tol -0`` was taken as given and printed "within tolerance -0"."""
    afile = tmp_path / "afile.txt"
    afile.write_text("")
    refused(*run(["models", "list", "--cache", str(afile)], capsys), "is a file, not a folder")
    assert run(["models", "list", "--cache", str(tmp_path / "new")], capsys)[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 2, "block_length": 1, "target": [0.5, 0.6], '
                   '"draft": [0.5, 0.5]}')
    code, out, err = run(["exact", str(bad), "--tol", "-0"], capsys)
    refused(code, out, err, "not 1 within tolerance 0")
    assert "-0" not in err
