"""Bad inputs that an outside probe of the kit's less-travelled helpers found not clean, each now
refused in one line naming the problem (or, where the input was valid, handled):

* ``audit --rows-file`` with tensors on the meta device (a traceback), and the Python
  ``audit(rows=...)`` measuring dtype errors on rows that are not laws (NaN, sums of 3);
* ``kit_logits`` on a meta tensor (torch's own error);
* ``effective_frequency_penalty(steps=12..64)`` enumerating V^N sequences before the law's own
  size guard (a hang, a MemoryError of 13 PiB, numpy's "Maximum allowed size exceeded");
* a truthy string as a planted-bug switch (``ZeroDraftAdvanceEngine(zero_draft_bug="no")``
  planted the bug), and as ``default_battery(exact=...)`` / ``kit_replicas(ports=...)``;
* a user grammar whose ``vocab_size`` is the text ``"3"`` (reported as 3 tokens against 3);
* a vector file with ``"NaN"`` where a fraction is written (a MISMATCH verdict), and a 100 KB
  entry echoed whole in a MISMATCH line;
* no-repeat masks over a history of 10^6 tokens (11 s, one n-gram start at a time);
* torch numbers as sampling parameters (refused, while numpy scalars are taken)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cli_helpers import refused, run
from spectheory.cli.audit import audit
from spectheory.inputs.processing import SamplingParams
from spectheory.inputs.stateful import GrammarError, TokenAutomaton, kit_logits, no_repeat_mask
from spectheory.runtime.errors import OptionError, SizeLimitError, SpectheoryError


def _rows(B=2, L=2, V=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, 1, L, V, generator=g, dtype=torch.float64)
    p = torch.rand(B, 1, L + 1, V, generator=g, dtype=torch.float64)
    drafts = torch.randint(0, V, (B, 1, L), generator=g)
    return drafts, q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)


@pytest.mark.parametrize("which", ["drafts", "q"])
def test_audit_rows_file_on_the_meta_device_is_refused(tmp_path, capsys, which):
    drafts, q, p = _rows()
    obj = {"drafts": drafts, "q": q, "p": p}
    obj[which] = obj[which].to("meta")
    path = tmp_path / "rows.pt"
    torch.save(obj, path)
    code, out, err = run(["audit", "--verifier", "token", "--rows-file", str(path)], capsys)
    refused(code, out, err, f"{which} is on the meta device")


@pytest.mark.parametrize("edit,words", [
    (lambda q: q * 3, "the q rows are not distributions"),
    (lambda q: q.masked_fill(q > 0.1, float("nan")), "the q rows are not distributions"),
    (lambda q: q.to("meta"), "q is on the meta device"),
])
def test_python_audit_refuses_rows_that_are_not_laws(edit, words):
    drafts, q, p = _rows()
    with pytest.raises(SpectheoryError, match=words):
        audit("token", rows=(drafts, edit(q), p))
    with pytest.raises(SpectheoryError, match="must be \\(drafts, q, p\\)"):
        audit("token", rows=(drafts, q))


def test_python_audit_of_valid_rows_equals_the_files(tmp_path, capsys):
    """The same rows audited from Python and from a rows file give the same errors."""
    drafts, q, p = _rows()
    mine = audit("token", rows=(drafts, q, p), dtypes=("float32",))
    assert len(mine) == 1 and np.isfinite(mine[0].output_tv)
    path = tmp_path / "rows.pt"
    torch.save({"drafts": drafts, "q": q, "p": p, "models": "x" * 10**6}, path)
    code, out, err = run(["audit", "--verifier", "token", "--rows-file", str(path),
                          "--dtypes", "float32", "--json"], capsys)
    assert code == 0, err
    (row,) = json.loads(out)["audit"]["recorded"]
    assert row["output_tv"] == mine[0].output_tv
    code, out, err = run(["audit", "--verifier", "token", "--rows-file", str(path),
                          "--dtypes", "float32"], capsys)
    assert code == 0 and len(out) < 2_000  # the 1 MB models entry is cut in the header


def test_kit_logits_refuses_meta_rows():
    with pytest.raises(OptionError, match="meta device"):
        kit_logits(torch.full((2, 3), 1 / 3, device="meta"))


@pytest.mark.parametrize("steps,error", [(12, SizeLimitError), (30, SizeLimitError),
                                         (65, OptionError)])
def test_effective_frequency_penalty_guards_its_size_first(steps, error):
    from spectheory.testing.mutants import stateful_steps as S

    with pytest.raises(error):
        S.effective_frequency_penalty(1.0, steps=steps)


@pytest.mark.parametrize("nominal", [-1.0, 0.0, float("nan"), float("inf"), True, "1"])
def test_effective_frequency_penalty_takes_a_positive_nominal(nominal):
    from spectheory.testing.mutants import stateful_steps as S

    with pytest.raises(OptionError, match="positive finite frequency penalty"):
        S.effective_frequency_penalty(nominal, steps=1)


@pytest.mark.parametrize("make", [
    lambda: __import__("spectheory.testing.checks.seeds", fromlist=["x"])
    .ZeroDraftAdvanceEngine("no"),
    lambda: __import__("spectheory.testing.checks.battery", fromlist=["x"])
    .default_battery(exact="no"),
    lambda: __import__("spectheory.testing.designs.sharp", fromlist=["x"])
    .kit_replicas(ports="no"),
])
def test_a_truthy_string_is_no_switch(make):
    with pytest.raises(OptionError, match="'no' must be True or False"):
        make()


def test_the_zero_draft_engine_plants_its_bug_only_when_asked():
    from spectheory.testing.checks.seeds import ZeroDraftAdvanceEngine

    assert ZeroDraftAdvanceEngine(False).bug is False
    assert ZeroDraftAdvanceEngine(np.bool_(True)).bug is True


def test_a_grammar_vocabulary_that_is_not_an_integer_is_named():
    import spectheory as st

    class G(TokenAutomaton):
        pass

    g = G([[0, 0, 0]])
    g.vocab_size = "3"
    inst = st.random_instance(vocab_size=3, block_length=2, seed=0)
    with pytest.raises(GrammarError, match="vocab_size = '3' is not an integer"):
        st.analyze(inst, "block", sampling=SamplingParams(grammar=g))
    g.vocab_size = 4
    with pytest.raises(GrammarError, match="the grammar has 4 tokens, the rows it masks 3"):
        st.analyze(inst, "block", sampling=SamplingParams(grammar=g))


@pytest.fixture
def exported(tmp_path):
    from spectheory.testing.checks.vectors import export_vectors
    from cli_helpers import TOY

    src = tmp_path / "toy.json"
    src.write_text(json.dumps(TOY))
    out = tmp_path / "out"
    (name,) = export_vectors(out, ["block"], [str(src)])
    return out / name


def test_a_vector_file_with_nan_where_a_fraction_is_written_is_malformed(exported, capsys):
    v = json.loads(exported.read_text())
    v["tau_pmf"][0] = "NaN"
    exported.write_text(json.dumps(v))
    code, out, err = run(["vectors", "check", str(exported.parent)], capsys)
    refused(code, out, err, 'field tau_pmf[0] = "NaN" is not a fraction string')


def test_a_huge_mismatching_entry_is_cut(exported, capsys):
    v = json.loads(exported.read_text())
    v["tau_pmf"][0] = "1/" + "7" * 4000  # a fraction, of another value: a mismatch
    exported.write_text(json.dumps(v))
    code, out, err = run(["vectors", "check", str(exported.parent)], capsys)
    assert code == 1 and out.startswith("MISMATCH") and len(out) < 400, len(out)
    v["tau_pmf"][0] = "1/" + "7" * 100_000  # past any fraction the files write: malformed
    exported.write_text(json.dumps(v))
    code, out, err = run(["vectors", "check", str(exported.parent)], capsys)
    refused(code, out, err, "is not a fraction string")


def _no_repeat_reference(history, V, n):
    """transformers' rule one n-gram start at a time (the mask's former loop)."""
    N, m = history.shape
    allowed = np.ones((N, V), dtype=bool)
    for k in range(m - n + 1):
        for r in range(N):
            if n == 1 or (history[r, k:k + n - 1] == history[r, m - n + 1:]).all():
                allowed[r, history[r, k + n - 1]] = False
    return allowed


def test_no_repeat_mask_equals_the_rule_and_takes_long_histories():
    rng = np.random.default_rng(0)
    for _ in range(400):
        N, m = int(rng.integers(1, 5)), int(rng.integers(0, 10))
        V, n = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        h = rng.integers(0, V, size=(N, m))
        assert (no_repeat_mask(h, V, n) == _no_repeat_reference(h, V, n)).all(), (h, V, n)
    h = np.zeros((1, 10**6), np.int64)  # every bigram (0, 0): token 0 banned after 0
    assert no_repeat_mask(h, 3, 2).tolist() == [[False, True, True]]


def test_torch_numbers_are_sampling_parameters():
    sp = SamplingParams(frequency_penalty=torch.tensor(0.5), top_k=torch.tensor(3),
                        min_tokens=torch.tensor(2), stop_token_ids=[1])
    assert sp == SamplingParams(frequency_penalty=0.5, top_k=3, min_tokens=2, stop_token_ids=[1])
    for bad in (torch.tensor(True), torch.tensor([0.5]), torch.tensor(0.5, device="meta"),
                torch.tensor(1 + 1j)):
        with pytest.raises(SpectheoryError, match="is not a number"):
            SamplingParams(frequency_penalty=bad)
