"""Bad arguments to the kit's Python functions, each refused in one line naming the argument,
before any work: the instance builders (`make_instance`, `tied_instance`, `default_instances`),
the ``instances`` argument of every check (a number or an object where a list was meant), the
seed checks' ``schedule`` and `check_step`'s ``max_seconds``. Each case failed before with a
Python error from deep inside the check, ran an instance of an unknown kind, or hung."""

from __future__ import annotations

import time

import pytest

import spectheory as st
import spectheory.testing as T
from spectheory.runtime.errors import OptionError, SpectheoryError, as_list
from spectheory.inputs.random_instances import MAX_SEED


def _refused(fn, pattern, error=SpectheoryError):
    with pytest.raises(error, match=pattern) as info:
        fn()
    assert "\n" not in str(info.value)
    return info.value


# ----------------------------------------------------------------------------- builders


@pytest.mark.parametrize("kind", [None, "x", "random", float("nan"), 3, True, []])
def test_make_instance_takes_only_its_kinds(kind):
    _refused(lambda: T.make_instance(kind, 3, 2, 0), r"^make_instance: kind = .* is not one "
                                                     r"of dirichlet, context_independent")


def test_make_instance_bounds_L_before_computing_V_to_the_L():
    """V^(L+1) for L = 10^15 is one big-integer power that no signal interrupts: the call is
    made in a child, which a hang fails in 60 s instead of hanging the suite."""
    import subprocess
    import sys

    code = ("from spectheory.testing import make_instance\n"
            "try:\n    make_instance('dirichlet', 3, 10**15, 0)\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("make_instance(L = 10^15) did not return within 60 s")
    assert out.startswith("OptionError make_instance: L = 1000000000000000 is out of range "
                          "[1, 64]"), out


@pytest.mark.parametrize("args, pattern", [
    (dict(V=10**9), r"make_instance: V = 1000000000 is out of range"),
    (dict(V=2.5), r"make_instance: V = 2.5 must be an integer"),
    (dict(seed=-1), r"make_instance: seed = -1 is out of range \[0, "),
    (dict(seed="x"), r"make_instance: seed = 'x' must be an integer"),
    (dict(seed=None), r"make_instance: seed = None must be an integer"),
    (dict(seed=1.5), r"make_instance: seed = 1.5 must be an integer"),
    (dict(alpha=float("nan")), r"make_instance: alpha = nan is out of range"),
    (dict(alpha=float("inf")), r"make_instance: alpha = inf is out of range"),
    (dict(alpha=None), r"make_instance: alpha = None is not a number"),
    (dict(alpha=-1), r"make_instance: alpha = -1 is out of range"),
    (dict(alpha=True), r"make_instance: alpha = True is not a number"),
    (dict(denominator=-3), r"make_instance: denominator = -3 is out of range"),
    (dict(denominator=[]), r"make_instance: denominator = \[\] must be an integer"),
    (dict(denominator=float("inf")), r"make_instance: denominator = inf must be an integer"),
])
def test_make_instance_checks_every_argument_before_drawing(args, pattern):
    call = dict(kind="dirichlet", V=3, L=2, seed=0) | args
    t = time.perf_counter()
    _refused(lambda: T.make_instance(**call), pattern, OptionError)
    assert time.perf_counter() - t < 5


def test_make_instance_controls():
    for kind in ("dirichlet", "sparse", "peaked", "equal", "onehot_draft"):
        inst = T.make_instance(kind, 3, 2, MAX_SEED, alpha=0.5, denominator=6)
        assert (inst.vocab_size, inst.block_length) == (3, 2)
    a, b = T.make_instance("dirichlet", 3, 2, 7), T.make_instance("dirichlet", 3, 2, 7)
    assert (a.target.level(2) == b.target.level(2)).all()  # the seed still decides the rows


@pytest.mark.parametrize("args, pattern", [
    (dict(V=None, D=2), r"^a tied instance needs an integer V >= 3, not None"),
    (dict(V="4", D=2), r"^a tied instance needs an integer V >= 3, not '4'"),
    (dict(V=2, D=2), r"^a tied instance needs an integer V >= 3, not 2"),
    (dict(V=4, D=10**12), r"^tied_instance: block_length = 1000000000000 is out of range"),
    (dict(V=4, D=2, seed=-5), r"^tied_instance: seed = -5 is out of range"),
])
def test_tied_instance_checks_its_arguments(args, pattern):
    _refused(lambda: T.tied_instance(**args), pattern, OptionError)
    assert T.tied_instance(4, 2).vocab_size == 4  # control


@pytest.mark.parametrize("mode", [None, "lossy", 3, ["law"]])
def test_default_instances_names_an_unknown_mode(mode):
    _refused(lambda: T.default_instances(mode), r"^default_instances: mode = .* is not one of "
                                                r"law, lossless, coins, coins-tau")
    assert len(T.default_instances("coins")) == len(T.default_instances())  # control


def test_kit_design_takes_a_verifier_name():
    _refused(lambda: T.kit_design(verifier=["token"]),
             r"^kit_design: verifier = \['token'\] must be a registered verifier's name",
             OptionError)


# ----------------------------------------------------------------------------- instances=


NOT_A_LIST = [float("nan"), -1, 10**15, True, object(), float("inf")]


def _checks():
    block = T.make_sampler("block")
    return {
        "check_sampler": lambda x: T.check_sampler(block, instances=x, samples=500),
        "check_proposal": lambda x: T.check_proposal(lambda q, n, g: None, instances=x,
                                                     samples=500),
        "check_tree_sampler": lambda x: T.check_tree_sampler(block, instances=x, samples=500),
        "check_lossless_battery": lambda x: T.check_lossless_battery("block", instances=x),
        "check_step": lambda x: T.check_step(T.vllm_v1_step, instances=x, samples=500),
        "check_batch_invariance": lambda x: T.check_batch_invariance(T.keyed_plain_step,
                                                                     instances=x),
    }


@pytest.mark.parametrize("check", sorted(_checks()))
@pytest.mark.parametrize("value", NOT_A_LIST, ids=lambda v: type(v).__name__ + repr(v)[:6])
def test_instances_that_are_not_a_list_are_named(check, value):
    _refused(lambda: _checks()[check](value),
             rf"^(instances must be a list of .*, not {type(value).__name__}"
             rf"|an instance must be a spectheory Instance, not {type(value).__name__})$")


def test_one_instance_alone_is_a_list_of_one_where_the_check_takes_one():
    inst = T.make_instance("dirichlet", 3, 2, 4)
    assert T.check_step(T.vllm_v1_step, instances=inst, samples=2_000).passed
    assert T.check_lossless_battery("block", instances=inst)[0].lossless
    # the sampler checks take a list: one instance alone is named, not iterated
    _refused(lambda: T.check_sampler(T.make_sampler("block"), instances=inst, samples=500),
             r"^instances must be a list of spectheory Instances or DraftRows, not Instance$")


def test_proposal_rows_that_are_not_numbers_are_the_callers_fault():
    calls = []

    def sampler(q, n, g):
        calls.append(1)

    _refused(lambda: T.check_proposal(sampler, instances=[["a", "b"]], samples=500),
             r"^proposal rows: list \['a', 'b'\] is neither an Instance nor a tensor \[R, V\] "
             r"of numbers; the draft sampler was not called$")
    _refused(lambda: T.check_proposal(sampler, instances=[], samples=500),
             r"^instances is empty")
    assert calls == []


def test_as_list():
    assert as_list((1, 2), "xs", "numbers") == [1, 2]
    assert as_list(iter("ab"), "xs", "letters") == ["a", "b"]
    assert as_list(3, "xs", "numbers", lone=(int,)) == [3]
    for bad in ("ab", b"ab", 3, None):
        with pytest.raises(OptionError, match=rf"^xs must be a list of numbers, not "
                                              rf"{type(bad).__name__}$"):
            as_list(bad, "xs", "numbers")


# ----------------------------------------------------------------------------- other arguments


@pytest.mark.parametrize("check", [T.check_seed_replay, T.check_batch_invariance])
@pytest.mark.parametrize("schedule", [None, "all", 1])
def test_seed_checks_name_an_unknown_schedule(check, schedule):
    # None ran the "mixed" schedule in one check and failed with KeyError in the other
    _refused(lambda: check(T.keyed_plain_step, schedule=schedule),
             r"^schedule = .* is not one of full, none, mixed$", OptionError)


def test_check_step_max_seconds_is_a_number_not_a_switch():
    _refused(lambda: T.check_step(T.vllm_v1_step, samples=500, max_seconds=True),
             r"^max_seconds = True must be a positive number or None$", OptionError)


# ----------------------------------------------------------------------------- integers as text


@pytest.mark.parametrize("text", ["\u0661", "1_0", "+-5", "\uff13", " 2 3"])
def test_ascii_int_takes_a_sign_and_ascii_digits_only(text):
    from spectheory.runtime.limits import ascii_int
    from spectheory.runtime.threads import parse_threads

    assert ascii_int(text) is None
    with pytest.raises(OptionError, match=r"is not an integer"):
        parse_threads(text)
    assert ascii_int(" +7 ") == 7 and ascii_int("-3") == -3 and parse_threads(" 1 ") == 1


@pytest.mark.parametrize("argv, words", [
    (["--threads", "\u0661", "verifiers"], "--threads '\u0661' is not an integer"),
    (["vectors", "export", "out", "--paths", "\u0662"], "is not an integer in ASCII digits"),
    (["vectors", "export", "out", "--paths", "+-5"], "'+-5' is not an integer in ASCII digits"),
    (["check-step", "steps_mod:f", "--seed", "+-5"], "--seed = '+-5' is not an integer"),
    (["check-step", "steps_mod:f", "--seed", "\u0663"], "--seed = '\u0663' is not an integer"),
    (["claims", "--only", ""], "--only '' names nothing"),
    (["claims", "--only", "   "], "names nothing"),
])
def test_command_line_integers_and_filters(argv, words, tmp_path, capsys, monkeypatch):
    from cli_helpers import refused, run

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "steps_mod.py").write_text("def f(*a, **k):\n    raise AssertionError\n")
    refused(*run(argv, capsys), words)
    assert not (tmp_path / "out").exists()


def test_ray_ports_and_tree_shapes_in_ascii_digits():
    from spectheory.runtime.raycluster import split_address
    from spectheory.sweep.config import _shapes

    with pytest.raises(OptionError, match="is not a Ray address"):
        split_address("head:\u0666\u0663\u0667\u0669")
    assert split_address("head:6379") == ("head", 6379)
    with pytest.raises(OptionError, match="must be branching factors"):
        _shapes(["2,\u0662"], "shapes")
    assert _shapes(["2, 2,1"], "shapes") == ["2,2,1"]


# ----------------------------------------------------------------------------- registry, analyze


def _law(d, q, p):
    raise AssertionError("not called")


@pytest.mark.parametrize("meta, pattern", [
    (dict(lossless="yes"), r"lossless = 'yes' must be True or False"),
    (dict(lossless=1), r"lossless = 1 must be True or False"),
    (dict(order_invariant="no"), r"order_invariant = 'no' must be True or False"),
    (dict(exact=float("nan")), r"exact = nan must be True or False"),
    (dict(paper=3), r"paper = 3 must be a string"),
    (dict(summary=object()), r"summary = <object .* must be a string"),
    (dict(node_form=2.5), r"node_form = 2.5 must be a string"),
    (dict(node="token"), r"node = 'token' is not a NodeForm"),
    (dict(paths=True), r"paths must be 1 or None"),
])
def test_verifier_metadata_is_checked_when_declared(meta, pattern):
    # lossless="yes" was kept as a truthy string: listed by neither registered(lossless=True)
    # nor registered(lossless=False)
    _refused(lambda: st.verifier(_law, name="mine", **meta), rf"^verifier 'mine': {pattern}")


def test_verifier_metadata_controls():
    import numpy as np

    spec = st.verifier(_law, name="mine", lossless=np.bool_(False), paper="arXiv 0").spectheory_spec
    assert spec.lossless is False and spec.paper == "arXiv 0"
    _refused(lambda: st.verifier(_law, name=3), r"^a verifier's name must be a non-empty string")


@pytest.mark.parametrize("value", ["yes", 1, float("nan"), []])
def test_registry_filters_are_true_false_or_none(value):
    _refused(lambda: st.registered(lossless=value), r"^registered: lossless")
    _refused(lambda: st.registered(single_path=value), r"^registered: single_path")
    _refused(lambda: st.get_verifier("block", multi_path=value), r"^get_verifier: multi_path")
    lossy = st.registered(lossless=False)
    assert lossy and all(not s.lossless for s in lossy.values())  # control


@pytest.mark.parametrize("cores", ["4", 0, -2, 2.5, True, [2]])
def test_default_threads_names_a_bad_core_count(cores):
    _refused(lambda: st.default_threads(cores), r"^cores = .* must be an integer >= 1",
             OptionError)


def test_default_threads_controls(monkeypatch):
    import numpy as np

    monkeypatch.delenv("SPECTHEORY_THREADS", raising=False)
    assert st.default_threads(2) == 1 and st.default_threads(np.int64(16)) == 8


@pytest.mark.parametrize("name", [3, ["a"], object()])
def test_analyze_label_is_a_string(name):
    inst = st.random_instance(3, 2, 1)
    _refused(lambda: st.analyze(inst, "block", name=name),
             r"^name = .* must be a string \(the result's label\) or None$")
    assert st.analyze(inst, "block", name="mine").verifier == "mine"  # control


# ----------------------------------------------------------------------------- more of the kit


def test_default_battery_bounds_paths_before_sizing():
    # paths = 10^15 computed V^(L K) for each candidate size: it never returned
    t = time.perf_counter()
    for paths in (10**15, 21, 0, True, 2.0):
        _refused(lambda: T.default_battery(paths), r"^paths = .* must be an integer in 1\.\.20")
    assert time.perf_counter() - t < 5
    assert len(T.default_battery(20, exact=False)) == len(T.default_battery(1))  # control


@pytest.mark.parametrize("bugs, pattern", [
    (3, r"^bugs must be a list of bug names, not int$"),
    (float("nan"), r"^bugs must be a list of bug names, not float$"),
    ([["bonus-previous-row"]], r"^unknown bonus-path bug \['bonus-previous-row'\]"),
    (["x"], r"^unknown bonus-path bug 'x'"),
])
def test_bonus_replicas_name_bad_bugs(bugs, pattern):
    _refused(lambda: T.bonus_replicas("token", bugs), pattern)


def test_bonus_kit_controls():
    one = T.bonus_replicas("token", "bonus-previous-row")  # one name alone: a list of one
    assert [r.name for r in one] == ["token-bonus-previous-row"]
    _refused(lambda: T.bonus_sampler(["bonus-previous-row"]), r"^unknown bonus-path bug")


def test_engine_globals_and_point_mass_name_bad_input():
    _refused(lambda: T.engine_globals(T.vllm_v1_rejection_sample, ["torch"]),
             r"^engine_globals: name = \['torch'\] must be a string", OptionError)
    assert T.engine_globals(T.vllm_v1_rejection_sample, "torch") is not None  # control
    for bad in ("x", object(), [[1, "a"]]):
        _refused(lambda: T.is_point_mass(bad), r"^is_point_mass: probs = .* is not a row of "
                                               r"numbers")
    assert T.is_point_mass([0, 1.0, 0]) and not T.is_point_mass([0.5, 0.5])
    # rows that are no law were called point masses (True for NaN, empty, all-zero, negative)
    for bad, words in (([float("nan"), 1.0], "an entry nan"), ([-1.0, 2.0], "entry -1.0"),
                       ([], "no positive entry"), ([0.0, 0.0], "no positive entry"),
                       ([0.5, float("inf")], "entry inf")):
        _refused(lambda: T.is_point_mass(bad), r"^is_point_mass: probs has " + ".*" + words)


# ----------------------------------------------------------------------------- laws called directly


def _rows():
    import torch

    g = torch.Generator().manual_seed(3)
    q = torch.softmax(torch.randn(2, 2, 3, generator=g), -1)
    p = torch.softmax(torch.randn(2, 3, 3, generator=g), -1)
    return torch.tensor([[0, 1], [2, 0]]), q, p


@pytest.mark.parametrize("law", ["token_verification", "block_verification", "ngram_verification",
                                 "uniform_product_verification", "hsd", "hsd_released"])
@pytest.mark.parametrize("at", [0, 1, 2])
@pytest.mark.parametrize("bad", [None, 3, "x", [[0, 1]]])
def test_a_law_called_directly_names_arguments_that_are_not_arrays(law, at, bad):
    import spectheory.verifiers as V

    args = list(_rows())
    if law == "ngram_verification" and at == 1:
        return  # q is not read
    args[at] = bad
    _refused(lambda: getattr(V, law)(*args),
             r"(drafts, q and p must be arrays \(torch or numpy\), got"
             r"|drafts and p must be arrays \(torch or numpy\), got .* \(q is not read\)$"
             r"|p must be an array of rows \(a torch tensor\), not)")
    assert getattr(V, law)(*_rows()).stop.shape == (2, 3)  # control


def test_float_drafts_and_a_non_function_verifier_are_named():
    import spectheory.verifiers as V

    drafts, q, p = _rows()
    _refused(lambda: V.block_verification(drafts.float(), q, p),
             r"drafts are torch.float32; draft tokens are integer ids")
    _refused(lambda: st.verifier("not a function"), r"^@verifier declares a function, not str")


def test_sample_drafts_names_a_generator_that_is_not_one():
    from spectheory.engine.sampling import sample_drafts

    inst = st.random_instance(3, 2, 1).to_float()
    _refused(lambda: sample_drafts(inst, 1, 4, "iid", 7), r"^generator = 7 must be a torch")
    import torch

    assert sample_drafts(inst, 1, 4, "iid", torch.Generator().manual_seed(0)).shape == (4, 1, 2)


@pytest.mark.parametrize("name", ["multiplicative(\u0661)", "additive(\u0661/\u0662)",
                                  "additive(0.\u0665)", "additive(\uff11/2)"])
def test_rule_parameters_are_ascii_numbers(name):
    # \d without re.ASCII matched other scripts' digits, which int() and Fraction() read:
    # multiplicative(<Arabic-Indic one>) was multiplicative(1)
    _refused(lambda: st.get_verifier(name), r"the parameters must be numbers", OptionError)
    assert st.get_verifier("multiplicative(1)").name == "multiplicative(1)"  # control


@pytest.mark.parametrize("text", ["temperature=\u0660.5", "top_p=0.\u0665", "min_p=1_0",
                                  "repetition_penalty=\u0661", "logit_bias=1:\u0662"])
def test_sampling_numbers_are_ascii(text):
    # float() read these as 0.5, 0.5, 10.0, 1.0 and 2.0
    _refused(lambda: st.parse_sampling(text), r"is not a number in ASCII digits")
    assert st.parse_sampling("temperature=1/2,logit_bias=1:-inf") is not None  # control


@pytest.mark.parametrize("argv", [
    # each run small were the number taken (a regression fails fast, no long run started)
    ["figures", "--threads", "\u0662", "--out", "out", "--quick", "--only", "fig3"],
    ["hetero", "--n-tokens", "\u0663"],
    ["validate", "lossless", "--samples", "1_0", "--out", "out"],
    ["validate", "costs", "--reps", "\u0661", "--out", "out"],
    ["validate", "run", "--temperature", "\u0660.5", "--out", "out"],
])
def test_typed_options_of_every_command_read_ascii_numbers(argv, tmp_path, capsys, monkeypatch):
    # options declared type=int or type=float: int() and float() read these as numbers
    from cli_helpers import refused, run

    monkeypatch.chdir(tmp_path)
    refused(*run(argv, capsys), "invalid", "value")
    assert not (tmp_path / "out").exists()


def test_typed_options_controls():
    from spectheory.cli import _ascii_float, _ascii_int

    assert _ascii_int(" 12 ") == 12 and _ascii_float("1e-3") == 1e-3
    for bad in ("1_0", "\u0661", "+-1"):
        with pytest.raises(ValueError):
            _ascii_int(bad)
        with pytest.raises(ValueError):
            _ascii_float(bad)


@pytest.mark.parametrize("name", ['""', "3", '"a\\nb"', '"   "', f'"{"x" * 201}"'])
def test_a_sweep_name_is_a_printable_label(name):
    # 3 was turned into "3" and "" taken: a label the messages and the output's record print
    from spectheory.sweep.config import load_config

    text = f'[sweep]\nname = {name}\n[[instances]]\nfamily = "random"\nvocab = [2]\n' \
           'block = [1]\nseeds = [0]\n[[verifiers]]\nname = ["token"]\n'
    _refused(lambda: load_config(text), r"^\[sweep\] name = .* must be a non-empty printable "
                                        r"string", OptionError)
    assert load_config(text.replace(f"name = {name}", 'name = "ok"')).name == "ok"  # control


@pytest.mark.parametrize("argv, words", [
    (["audit", "--rows-file", ""], "--rows-file '' names no file"),
    (["models", "list", "--cache", ""], "--cache '' names no folder"),
    (["models", "path", "smollm2-135m", "--cache", " "], "names no folder"),
])
def test_a_blank_path_is_a_typo_not_the_default(argv, words, capsys):
    # each ran as if the option were not given (the audit's default rows, the default cache)
    from cli_helpers import refused, run

    refused(*run(argv, capsys), words)


def test_engine_port_coin_sizes_are_bounded_before_allocating():
    import torch

    _refused(lambda: T.generate_uniform_probs(10**13, [1], {}), r"needs about .* of memory")
    _refused(lambda: T.generate_uniform_probs(-1, [], {}), r"num_tokens = -1 must be an integer")
    one = torch.tensor([1])
    _refused(lambda: T.counter_uniforms(one, one, 5, columns=10**13), r"needs about .* of memory")
    _refused(lambda: T.counter_uniforms(one, one, 5, columns=2.5), r"columns = 2.5 must be")
    assert T.counter_uniforms(torch.tensor([1, 2]), torch.tensor([0, 1]), 5, 3).shape == (2, 3)


def test_sequence_laws_bound_their_token_count_before_making_V_to_the_N():
    """tokens = 10^15 made V^N, one big-integer power that no signal interrupts and that never
    returned: the calls run in a child, which a regression fails in 60 s."""
    import subprocess
    import sys

    code = ("import spectheory.testing as T\n"
            "inst = T.default_step_instances()[0]\n"
            "for f in (T.target_sequence_law, T.generate_law, T.assisted_law):\n"
            "    try:\n        f(inst, 10**15)\n"
            "    except Exception as e:\n        print(type(e).__name__, str(e)[:60])\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60).stdout.splitlines()
    except subprocess.TimeoutExpired:
        pytest.fail("a sequence law with tokens = 10^15 did not return within 60 s")
    assert len(out) == 3 and all(line.startswith("SizeLimitError ") and
                                 "enumerates V^N = " in line for line in out), out
    inst = T.default_step_instances()[0]
    t = time.perf_counter()
    for call in (lambda n: T.target_sequence_law(inst, n), lambda n: T.generate_law(inst, n),
                 lambda n: T.assisted_law(inst, n)):
        for bad in (None, 2.5, "3", 0):
            _refused(lambda: call(bad), r"(N = .* tokens must be an integer >= 1|tokens = .* "
                                        r"must be an integer >= 1)", OptionError)
    assert time.perf_counter() - t < 5
    assert T.target_sequence_law(inst, 2).sum() == pytest.approx(1.0)  # control


@pytest.mark.parametrize("bad", [None, 3, "inst", [1]])
def test_sequence_laws_name_a_non_instance(bad):
    for what, call in (("target_sequence_law", lambda: T.target_sequence_law(bad, 2)),
                       ("generate_law", lambda: T.generate_law(bad, 2)),
                       ("assisted_law", lambda: T.assisted_law(bad, 2)),
                       ("shifted_law_instance", lambda: T.shifted_law_instance(bad))):
        _refused(call, rf"^{what}: the instance is .*, not a spectheory Instance$", OptionError)


def test_generate_law_stop_is_a_token_id():
    inst = T.default_step_instances()[0]
    for stop in (-1, inst.vocab_size, 1.0, "0", True):
        _refused(lambda: T.generate_law(inst, 2, stop=stop), r"^stop = .* must be a token id")
    assert T.generate_law(inst, 2, stop=0).sum() == pytest.approx(1.0)  # control


def test_adapters_and_tree_drafting_name_inputs_that_are_not_tensors():
    import torch

    drafts, q, p = _rows()
    g = torch.Generator().manual_seed(0)
    for sampler in (T.hf_sampler, T.vllm_sampler):
        _refused(lambda: sampler(None, q, p, g), r"canonical inputs are torch tensors")
        _refused(lambda: sampler(drafts, q, p, 7), r"generator = 7 must be a torch.Generator")
        tau, y = sampler(drafts, q, p, g)  # control
        assert tau.shape == y.shape == (2,)
    _refused(lambda: T.flatten_drafts([[0, 1]]), r"^flatten_drafts: drafts must be an integer torch")
    inst = st.random_instance(3, 2, 1)
    _refused(lambda: T.draft_trees("inst", (2, 1), "iid", 4, g), r"^draft_trees: the instance")
    _refused(lambda: T.draft_trees(inst, (2, 1), "iid", 4, 7), r"^draft_trees: generator = 7")
    _refused(lambda: T.draft_trees(inst, (2, 1), ["iid"], 4, g), r"^unknown tree drafting")
    _refused(lambda: T.bonus_law(drafts, q, p, bug=["bonus-previous-row"]),
             r"^unknown bonus-path bug")


# ----------------------------------------------------------------------------- helpers' own inputs


def test_the_kits_row_helpers_refuse_what_is_no_row_or_no_uniform():
    """Exported helpers answered nonsense: boundary_ties found no tie at tol = NaN or -1 (a real
    tie hidden), none in NaN or negative rows, and gave an IndexError on a scalar; the kit's
    inverse_cdf returned a token for a NaN, infinite, negative or unit uniform; rows_as_probs
    and processed_along took inputs="logit" and handed the logits back as probabilities;
    row_chi_square tested NaN, negative and infinite counts (p-values NaN, 2.5e-10, 0)."""
    import numpy as np
    import torch

    tie = np.array([0.5, 0.5])
    assert T.boundary_ties(tie, "temperature=0") == [()]  # control: the tie is found
    for bad_tol in (float("nan"), -1.0, "1e-6"):
        _refused(lambda: T.boundary_ties(tie, "temperature=0", tol=bad_tol),
                 r"^boundary_ties: tol = ", OptionError)
    for bad_p in (np.array([np.nan, np.nan]), np.array([-0.5, 1.5]), 0.5, np.zeros(0), "abc"):
        _refused(lambda: T.boundary_ties(bad_p, "top_p=0.5"), r"^boundary_ties: p ", OptionError)
    rows = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    assert T.inverse_cdf(rows, torch.tensor([0.75], dtype=torch.float64)).tolist() == [1]
    for u in (float("nan"), float("inf"), -0.5, 1.0):
        _refused(lambda: T.inverse_cdf(rows, torch.tensor([u], dtype=torch.float64)),
                 r"^inverse_cdf: a uniform is .*; uniforms lie in \[0, 1\)", OptionError)
    logits = torch.tensor([[0.0, 1.0, 2.0]])
    assert abs(float(T.rows_as_probs(logits, "logits").sum()) - 1) < 1e-6  # control
    for bad in ("logit", "LOGITS", None):
        _refused(lambda: T.rows_as_probs(logits, bad), r"^inputs = .* is not one of probs, "
                                                        r"logits$", OptionError)
        _refused(lambda: T.processed_along(logits[:, None], torch.zeros(1, 0, dtype=torch.long),
                                           None, inputs=bad), r"^inputs = ", OptionError)
    half = np.array([0.5, 0.5])
    assert T.row_chi_square(np.array([5.0, 5.0]), half, 10).p_value == 1.0  # control
    for obs in ([np.nan, 5.0], [-5.0, 15.0], [np.inf, 5.0]):
        _refused(lambda: T.row_chi_square(np.array(obs), half, 10),
                 r"^observed has an entry .*; counts are finite and >= 0")
    # counts that are not the n samples' were tested as if the missing ones were pooled: 5 + 5
    # of n = 1,000 put 990 samples in a pooled bin of expected count 0 (dropped), and the
    # check failed on (5 - 500)^2 / 500 twice; fractional shares that round are counts of n
    for obs, n in (([5.0, 5.0], 1000), ([600.0, 600.0], 1000), ([0.0, 0.0], 10)):
        _refused(lambda: T.row_chi_square(np.array(obs), half, n),
                 rf"^observed sums to {sum(obs)!r} counts, not n = {n}; the counts of one "
                 r"row's n samples$")
    thirds = np.full(3, 1 / 3)
    assert T.row_chi_square(thirds * 30, thirds, 30).p_value == pytest.approx(1.0)


def test_engine_helpers_refuse_holes_float_ids_and_names_they_cannot_read():
    """canonical_from_padded read [[-1, 2, 1]] (a hole) as (tau 1, Y 2) and [[-1, -1, -1]] as
    (-1, -1); flatten_drafts passed float ids on; emitted_groups raised an IndexError on too few
    tokens; engine_processing("bogus", ...) an AttributeError."""
    import torch

    from spectheory.engine.drafttrees import tree_shape

    tau, y = T.canonical_from_padded(torch.tensor([[1, 2, -1], [3, -1, -1]]))  # control
    assert tau.tolist() == [1, 0] and y.tolist() == [2, 3]
    for bad, words in ((torch.tensor([[-1, 2, 1]]), "row 0 has a placeholder before an emitted"),
                       (torch.tensor([[-1, -1, -1]]), "row 0 emitted no token"),
                       (torch.tensor([[1, -1, 2]]), "row 0 has a placeholder before an emitted"),
                       (torch.tensor([1, 2]), "must be an integer tensor"),
                       (torch.tensor([[1.0, 2.0]]), "must be an integer tensor")):
        _refused(lambda: T.canonical_from_padded(bad), "^canonical_from_padded: .*" + words)
    _refused(lambda: T.flatten_drafts(torch.tensor([[1.5, 2.0]])),
             r"^flatten_drafts: drafts must be an integer torch tensor \[B, L\], not .*float32")
    assert T.flatten_drafts(torch.tensor([[1, 2]]))[1].tolist() == [2]  # control
    tree = tree_shape((2, 1))
    assert T.emitted_groups(tree, [0, 1, 2, 3])[1] == [0, 1, 2, 3, 4]  # control
    for bad in ([0], [0, 1, 2, 3, 4], [0, -1, 2, 3], [0, 1.5, 2, 3], "abcd", 5):
        _refused(lambda: T.emitted_groups(tree, bad), r"^emitted_groups: tokens ", OptionError)
    _refused(lambda: T.engine_processing("bogus", "top_k=2"),
             r"^engine_processing: layout must be a Layout \(get_layout\('bogus'\)", OptionError)
