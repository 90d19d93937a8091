"""Bad inputs of the engine ports, the step helpers, the sampling state and the theory commands'
files, each refused by name where before they gave a raw error from deep inside, a hang or a
silent wrong answer:

* vLLM V1's ``apply_top_k_top_p`` port with top-k 0 (an index past the row: a RuntimeError from
  ``gather``), top-p above 1 or NaN (nothing masked, a silent pass-through), a float k, or a k or
  p of the wrong length (broadcast over every row);
* a negative frontier budget over a zero denominator (``--tv -0/0``), refused as a negative
  number where the division by zero is the fault."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from spectheory.runtime.errors import OptionError
from spectheory.testing.engines.adapters import apply_top_k_top_p


LOGITS = torch.tensor([[0.0, 1.0, 1.0, 2.0], [3.0, 0.5, 0.5, -1.0]])


@pytest.mark.parametrize("k,p,words", [
    (torch.tensor([0, 2]), None, "top_k = 0 is out of range: k >= 1"),
    (torch.tensor([2.0, 1.0]), None, "k must hold integers, not torch.float32"),
    (torch.tensor([2]), None, "k must be a tensor [n] = [2]"),
    (None, torch.tensor([0.5]), "p must be a tensor [n] = [2]"),
    (None, torch.tensor([1.5, 0.5]), "top_p = 1.5 is out of range: 0 < p <= 1"),
    (None, torch.tensor([0.5, 0.0]), "top_p = 0.0 is out of range"),
    (None, torch.tensor([float("nan"), 0.5]), "top_p = nan is out of range"),
    (None, torch.tensor([1, 1]), "p must hold floats in (0, 1], not torch.int64"),
])
def test_the_vllm_top_k_top_p_port_refuses_what_the_engine_never_holds(k, p, words):
    with pytest.raises(OptionError) as exc:
        apply_top_k_top_p(LOGITS, k, p)
    assert words in str(exc.value), str(exc.value)


def test_the_vllm_top_k_top_p_port_refuses_logits_that_are_not_a_float_matrix():
    for bad, words in ((LOGITS[0], "[n, V], not torch.float32 [4]"),
                       (LOGITS.long(), "not torch.int64 [2, 4]"),
                       (LOGITS.tolist(), "not list")):
        with pytest.raises(OptionError, match="logits must be a float tensor") as exc:
            apply_top_k_top_p(bad, torch.tensor([1, 1]), None)
        assert words in str(exc.value), str(exc.value)


def test_the_vllm_top_k_top_p_port_keeps_its_law_on_valid_input():
    """The control: top-k keeps ties at the k-th value, k past V keeps every token (the
    engine's clamp), top-p keeps the smallest head whose mass exceeds p, p = 1 keeps all."""
    out = apply_top_k_top_p(LOGITS, torch.tensor([2, 9]), None)
    assert torch.isinf(out[0]).tolist() == [True, False, False, False]  # 1.0 ties at k = 2
    assert torch.equal(out[1], LOGITS[1])
    out = apply_top_k_top_p(LOGITS, None, torch.tensor([1.0, 0.5]))
    assert torch.equal(out[0], LOGITS[0])
    assert torch.isinf(out[1]).tolist() == [False, True, True, True]  # 3.0 holds 0.85 > 0.5


# ----------------------------------------------------------------------------- the sampling state
# (the state around the sampler and the engines' whole steps)

from spectheory.inputs.processing import SamplingError, SamplingParams, parse_sampling, \
    process_rows  # noqa: E402
from spectheory.runtime.errors import SpectheoryError, call_user  # noqa: E402
from spectheory.testing import (TRANSFORMERS, VLLM_V1, engine_coin_sampler,  # noqa: E402
                                engine_sampler, hf_speculative_sampling,
                                vllm_v1_rejection_sample)
from spectheory.testing.checks.step import (StepRequest, TableLM,  # noqa: E402
                                            default_step_instances, processed_along,
                                            rows_as_probs, vllm_v1_step)
from spectheory.testing.engines.ports import llamacpp, trtllm  # noqa: E402
from cli_helpers import refused, run  # noqa: E402


def test_a_choices_tree_nested_a_thousand_deep_is_one_line(capsys):
    """`check-sampler --tree '[[[...]]]'` ended in a RecursionError traceback from the JSON
    parser (the `tree` command's --choices already counted the nesting first; both share it
    now); a tree too large names its shape as typed, not '1,000,1,000'."""
    deep = "[" * 1000 + "]" * 1000
    refused(*run(["check-sampler", "spectheory.testing:vllm_sampler", "--tree", deep], capsys),
            "--tree is nested deeper than a list of lists of child ranks")
    refused(*run(["check-sampler", "spectheory.testing:vllm_sampler", "--tree", "[[0],[1]"],
                 capsys), "--tree '[[0],[1]' is not JSON")
    refused(*run(["check-sampler", "spectheory.testing:vllm_sampler", "--tree", "1000,1000"],
                 capsys), "tree '1000,1000' has 1,001,000 drafted nodes")


def test_a_top_k_past_int32_reaches_the_vllm_port_as_the_vocabulary():
    """vLLM's input batch holds min(k, V) in int32; the kit put k itself there, and 2^31 did
    not fit ('value cannot be converted to type int without overflow')."""
    d, q, p = _canonical()
    s = engine_sampler(vllm_v1_rejection_sample, VLLM_V1, sampling="top_k=2147483648")
    tau, y = s(d, q, p, torch.Generator().manual_seed(0))
    assert 0 <= int(tau[0]) <= 2 and 0 <= int(y[0]) < 3


@pytest.mark.parametrize("value", [2**63, 2**70, "99999999999999999999", "9" * 5000])
def test_top_k_past_int64_is_refused_by_name(value):
    """top_k had no upper bound: 10^20 reached the engines' int64 tensors as an OverflowError
    (blamed on the user's step, or "outside the sampler's calls"); 2^63 - 1 is the largest."""
    with pytest.raises(SamplingError, match="sampling parameter top_k = .* top_k is an integer "
                                            r"in 1\.\.2\^63-1"):
        parse_sampling({"top_k": value} if isinstance(value, int) else f"top_k={value}")
    if isinstance(value, int):
        with pytest.raises(SamplingError, match="top_k"):
            SamplingParams(top_k=value)
    assert parse_sampling({"top_k": 2**63 - 1}).top_k == 2**63 - 1  # the control


def test_top_k_past_int64_on_the_command_line_names_the_parameter(capsys):
    refused(*run(["check-step", "spectheory.testing.checks.step:vllm_v1_step", "--sampling",
                  "top_k=99999999999999999999", "--samples", "2000"], capsys),
            "sampling parameter top_k = '99999999999999999999' is out of range")


def test_a_module_that_raises_keyboardinterrupt_at_import_is_its_failure(user_modules, capsys):
    """At import it read as a real Ctrl-C (exit 130, "interrupted"), where the same raise in a
    call is the user code's failure (exit 2)."""
    user_modules(m_kbint="raise KeyboardInterrupt\n")
    refused(*run(["check-step", "m_kbint:f"], capsys),
            "module 'm_kbint' (for step 'm_kbint:f') raised KeyboardInterrupt while being "
            "imported, with no interrupt received")


def test_a_child_forked_by_user_code_leaves_instead_of_running_the_check_on():
    """A step that called os.fork() returned in both processes, and the child ran the rest of
    the check: four reports on standard output. The child now leaves silently where it comes
    back into the toolkit; the parent goes on alone."""
    import os

    r, w = os.pipe()
    parent = os.getpid()

    def forks():
        return os.fork()

    child = call_user(forks)
    if os.getpid() != parent:  # a child that came back: it says so, and never runs the tests on
        os.write(w, b"the child came back\n")
        os._exit(0)
    os.write(w, b"the parent\n")
    os.close(w)
    _, status = os.waitpid(child, 0)
    seen = os.read(r, 4096).decode().splitlines()
    os.close(r)
    assert child > 0 and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert seen == ["the parent"], seen


def _canonical():
    d = torch.zeros(1, 2, dtype=torch.long)
    return d, torch.full((1, 2, 3), 1 / 3), torch.full((1, 3, 3), 1 / 3)


@pytest.mark.parametrize("which,value,words", [
    ("q", float("nan"), "the q row of batch row 0, position 0 has a non-finite entry"),
    ("p", float("nan"), "the p row of batch row 0, position 0 has a non-finite entry"),
    ("p", -0.5, "the p row of batch row 0, position 0 has a negative entry"),
    ("drafts", 7, "the drafted token 7 (row 0, position 0) is outside 0..2"),
    ("drafts", 0.5, "drafted token = 0.5 (dtype torch.float32), not an integer"),
    ("drafts", "list", "drafts is a list"),
])
def test_a_wrapped_engine_function_refuses_what_no_check_hands_it(which, value, words):
    """engine_sampler's wrapper checked shapes only: a NaN q gave an answer, a NaN p failed in
    the kit's own bonus draw, a list of drafts raised AttributeError."""
    d, q, p = _canonical()
    if which == "drafts":
        d = d.tolist() if value == "list" else torch.full((1, 2), value)
    else:
        (q if which == "q" else p)[0, 0, 0] = value
    s = engine_sampler(vllm_v1_rejection_sample, VLLM_V1)
    with pytest.raises(OptionError) as exc:
        s(d, q, p, torch.Generator().manual_seed(0))
    assert words in str(exc.value), str(exc.value)
    d, q, p = _canonical()  # the control
    tau, y = s(d, q, p, torch.Generator().manual_seed(0))
    assert 0 <= int(tau[0]) <= 2 and 0 <= int(y[0]) < 3


@pytest.mark.parametrize("coin", [float("nan"), 2.0, -0.25])
def test_a_coin_sampler_refuses_coins_outside_the_unit_interval(coin):
    """Coins of NaN or 2.0 reached the engine, and its error was reported as the engine's."""
    d, q, p = _canonical()
    s = engine_coin_sampler(hf_speculative_sampling, TRANSFORMERS)
    u = torch.full((1, 3), 0.5)
    u[0, 1] = coin
    with pytest.raises(OptionError, match=r"uniforms must lie in \[0, 1\], got"):
        s(d, q, p, u)
    s(d, q, p, torch.full((1, 3), 0.5))  # the control


def test_the_step_authors_helpers_read_or_refuse_their_rows():
    """rows_as_probs returned NaN rows and negative "probabilities"; processed_along raised
    AttributeError on a list of rows and called a list of tokens 'None'."""
    with pytest.raises(SamplingError, match="logits rows hold a NaN at row 0, token 0"):
        rows_as_probs(torch.full((1, 3), float("nan")), "logits")
    with pytest.raises(SamplingError, match="row 0, token 1 is -0.5"):
        rows_as_probs(torch.tensor([[1.5, -0.5, 0.0]]), "probs")
    with pytest.raises(SamplingError, match="rows must be a tensor"):
        rows_as_probs(object(), "probs")
    rows = torch.full((1, 3, 3), 1 / 3, dtype=torch.float64)
    tokens = torch.tensor([[0, 1]])
    want = processed_along(rows, tokens, "presence_penalty=1")
    assert torch.equal(processed_along(rows.tolist(), tokens, "presence_penalty=1"), want)
    assert torch.equal(processed_along(rows, [[0, 1]], "presence_penalty=1"), want)
    assert want[0, 1, 0] < want[0, 1, 2]  # the penalty acted: token 0 is in the history
    for tokens, words in (([[True, False]], "integer token ids [B, m], not torch.bool"),
                          ([["a", "b"]], "tokens must be token ids [B, m], not list")):
        with pytest.raises(SamplingError, match=words.replace("[", r"\[").replace("]", r"\]")):
            processed_along(rows, tokens, "presence_penalty=1")
    half = torch.softmax(torch.randn(2, 32_000, generator=torch.Generator().manual_seed(0)),
                         -1).half()  # sums off 1 by a few 1e-5 or more: model rows as they are
    assert torch.equal(rows_as_probs(half, "probs"), half.double())


def test_a_table_model_called_directly_refuses_what_is_not_token_ids():
    lm = TableLM(default_step_instances()[0].target, "target")
    for bad, words in ((["a"], "got list"), (torch.zeros(1, 2, dtype=torch.complex64),
                                             "got torch.complex64"),
                       (torch.zeros(1, 2, dtype=torch.long, device="meta"), "meta device")):
        with pytest.raises(SpectheoryError, match="the target model takes tokens") as exc:
            lm(bad)
        assert words in str(exc.value), str(exc.value)
    assert lm(torch.zeros(1, 2, dtype=torch.long)).shape[:2] == (1, 3)  # the control


def test_a_step_request_built_by_hand_is_checked_as_the_kit_builds_its_own():
    """The kit's reference steps, handed a request the kit never builds, failed inside
    (AttributeError, 'stack expects a non-empty TensorList', TypeError, a ValueError of
    unpacking); num_draft = 10^6 ran without end."""
    inst = default_step_instances()[0]
    good = dict(context=torch.zeros(4, 0, dtype=torch.long), draft=TableLM(inst.draft, "draft"),
                target=TableLM(inst.target, "target"), num_draft=2,
                generator=torch.Generator().manual_seed(0), seed=1)
    for key, value, words in (("context", None, "context must be an integer tensor [B, n]"),
                              ("context", torch.zeros(4, dtype=torch.long), "of shape [4]"),
                              ("draft", None, "draft must be a model"),
                              ("num_draft", 0, "num_draft = 0 must be an integer in 1..64"),
                              ("num_draft", 1.5, "num_draft = 1.5"),
                              ("num_draft", 10**6, "num_draft = 1000000"),
                              ("inputs", "logit", "inputs = 'logit' is not one of")):
        with pytest.raises(OptionError) as exc:
            StepRequest(**{**good, key: value})
        assert words in str(exc.value), (key, str(exc.value))
    assert vllm_v1_step(StepRequest(**good)) is not None  # the control: the step runs


def test_a_history_is_checked_even_where_no_parameter_reads_it():
    """process_rows(row, 'top_k=2', history=[0.5, 'x']) returned the row: the history was
    read only by the stateful parameters."""
    row = np.array([0.5, 0.25, 0.25])
    for history, words in (([0.5, "x"], "history must hold token ids"), ([7], "token 7, "
                                                                         "outside 0..2")):
        with pytest.raises(SpectheoryError, match=words):
            process_rows(row, "top_k=2", history=history)
    assert process_rows(row, "top_k=2", history=[1, 2]).tolist() == [0.5, 0.25, 0.25]


def test_the_tensorrt_llm_and_llama_cpp_ports_refuse_their_bad_inputs_by_name():
    """A misspelt planted bug ran the correct rule; None rows raised 'Could not infer dtype';
    a NaN in a llama.cpp candidate row was dropped as if it were 0."""
    q, p = torch.full((2, 3), 1 / 3), torch.full((3, 3), 1 / 3)
    with pytest.raises(OptionError, match="unknown bug 'bogus'"):
        trtllm.get_rejected_indices(q, p, torch.Generator(), torch.zeros(2, dtype=torch.long),
                                    bug="bogus")
    with pytest.raises(OptionError, match="unknown bug 'bogus'"):
        trtllm.sample_rejected(q, p, torch.Generator(), 0, bug="bogus")
    with pytest.raises(OptionError, match="draft_probs must be float probability rows"):
        trtllm.get_rejected_indices(None, None, None, None)
    with pytest.raises(OptionError, match="a probability row holds nan"):
        llamacpp.candidates(torch.tensor([float("nan"), 0.5, 0.5]))
    ids, probs = llamacpp.candidates(torch.tensor([0.25, 0.0, 0.75]))  # the control
    assert ids.tolist() == [2, 0] and probs.tolist() == [0.75, 0.25]


def test_an_llguidance_regex_is_sized_before_it_compiles():
    """The kit's regex grammar refused a pattern of over 100,000 unrolled items; llguidance's
    took it, and its masks then cost about a second per history token."""
    pytest.importorskip("llguidance")
    from spectheory.inputs.grammar_engines import llguidance_grammar
    from spectheory.inputs.stateful import GrammarError

    for pattern in ("((a{100}){100}){100}", "(a{1000}){1000}"):
        with pytest.raises(GrammarError, match="regex has over 100,000 items"):
            llguidance_grammar(["a", "b", "<e>"], 2, regex=pattern)
    g = llguidance_grammar(["a", "b", "<e>"], 2, regex="(a{10}){10}b")  # the control: 101
    assert g.vocab_size == 3 and g.allowed([0]).tolist() == [[True, False, False]]  # items


# ----------------------------------------------------------------------------- theory and files
# (the theory commands, their Python API and their input files)


def test_an_audit_rows_file_with_a_flat_p_is_one_line(tmp_path, capsys):
    """`audit --rows-file` with p [1, 1] indexed p.shape[2]: an IndexError traceback."""
    path = tmp_path / "rows.pt"
    torch.save({"drafts": torch.zeros(1, 1, 1, dtype=torch.long),
                "q": torch.full((1, 1, 1, 2), 0.5), "p": torch.full((1, 1), 0.5)}, path)
    refused(*run(["audit", "--rows-file", str(path), "--dtypes", "float32"], capsys),
            "shapes must be drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V]")


def test_the_python_api_names_a_wrong_argument_instead_of_failing_inside():
    import spectheory as st
    from spectheory.verifiers.hetero import string_law
    from spectheory.verifiers.relaxed import greedy_tree_coverage
    from toy_models import make_instance

    with pytest.raises(SpectheoryError, match="expected a spectheory Instance"):
        greedy_tree_coverage(None, 1)
    res = greedy_tree_coverage(st.random_instance(3, 2, 0).to_float(), 1)
    assert type(res.tv_to_target) is float  # a Python float in float mode, not numpy's
    with pytest.raises(SpectheoryError, match="token_law must be a dict"):
        string_law(None, None)
    for family in ([], {}, None):
        with pytest.raises(SpectheoryError, match="unknown toy family"):
            make_instance(family)

    def f(drafts, q, p):
        return None

    for kw, words in ((dict(name=torch.zeros(2)), "a verifier's name must be a non-empty "
                                                   "string"),
                      (dict(summary=torch.zeros(2)), "summary = tensor.* must be a string"),
                      (dict(node_form=torch.zeros(2)), "node_form = tensor.* must be a string"),
                      (dict(paths=torch.zeros(2)), "paths must be 1 or None")):
        with pytest.raises(SpectheoryError, match=words):
            st.verifier(f, **kw)
    for one in (1, 1.0, np.int64(1), None):  # the controls: the one path however written
        assert st.verifier(f, paths=one).spectheory_spec.paths == one


def test_a_verifier_name_on_two_lines_is_refused(tmp_path, capsys):
    """`--verifier $'additive(1/4)\\n'` was read (get_verifier strips it) and printed as typed,
    breaking the report's first line in two; spaces around a name are still read."""
    import spectheory as st
    from spectheory.inputs.instances import instance_to_dict
    from cli_helpers import write

    path = write(tmp_path, instance_to_dict(st.random_instance(3, 2, 0)))
    refused(*run(["exact", path, "--verifier", "addi\ttive(1/4)"], capsys),
            "holds a control character")
    code, out, err = run(["exact", path, "--verifier", "additive(1/4)\n"], capsys)
    assert code == 0 and out.startswith("additive(1/4): E[tau] = "), out
    code, out, err = run(["exact", path, "--verifier", " token "], capsys)
    assert code == 0 and out.startswith("token: E[tau] = "), out


def test_a_named_pipe_with_no_writer_is_refused_instead_of_waited_on(tmp_path, capsys):
    """`exact FIFO` and `sweep FIFO` blocked for ever in open() when nothing wrote to the pipe;
    a pipe whose writer comes (here a moment later) is still read."""
    import os
    import threading
    import time

    import spectheory as st
    from spectheory.inputs.instances import instance_to_dict

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    refused(*run(["exact", str(fifo), "--time-limit", "5"], capsys),
            "no writer wrote to the named pipe within 1 s")
    refused(*run(["sweep", str(fifo), "--out", str(tmp_path / "o")], capsys),
            "cannot read sweep file", "no writer wrote to the named pipe within 1 s")
    assert time.monotonic() - t0 < 10 and not (tmp_path / "o").exists()
    text = json.dumps(instance_to_dict(st.random_instance(3, 2, 0)))

    def writer():
        time.sleep(0.2)
        with open(fifo, "w") as fh:
            fh.write(text)

    thread = threading.Thread(target=writer)
    thread.start()
    code, out, err = run(["exact", str(fifo)], capsys)
    thread.join()
    assert code == 0 and out.startswith("block: E[tau] = "), err


def test_figures_only_keeps_the_other_figures_records_beside_a_stray_entry(tmp_path, capsys):
    """`figures --only fig3` into a folder whose figures.json held one entry that is not an
    object replaced the whole record, dropping every other figure's entry without a word."""
    from spectheory.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "figures.json").write_text(json.dumps({"fig1_accepted_vs_L": 5,
                                                  "fig2_gain_vs_divergence": {"mode": "full"}}))
    assert main(["figures", "--quick", "--only", "fig3", "--out", str(out), "--no-progress"]) == 0
    record = json.loads((out / "figures.json").read_text())
    assert record["fig2_gain_vs_divergence"] == {"mode": "full"}
    assert "fig1_accepted_vs_L" not in record and record["fig3_tau_pmf"]["mode"] == "quick"


def test_vectors_export_takes_a_time_limit_for_a_verifier_that_never_returns(user_modules,
                                                                             tmp_path, capsys):
    """`vectors export` had no --time-limit: a verifier that never returned held it for ever
    (exact, check and audit could bound the same verifier)."""
    import spectheory as st
    from spectheory.inputs.instances import instance_to_dict
    from cli_helpers import write

    user_modules(um="import time\ndef hangs(drafts, q, p):\n    time.sleep(60)\n")
    path = write(tmp_path, instance_to_dict(st.random_instance(2, 1, 0, denominator=6)))
    out = tmp_path / "vo"
    refused(*run(["vectors", "export", str(out), "--verifier", "um:hangs", "--instances", path,
                  "--time-limit", "0.5"], capsys),
            "time limit of 0.5 s reached", "verifier 'um:hangs' was running")
    assert not out.exists()
