"""A sampler's return value that cannot be read (a sparse or nested tensor, a tuple whose
iteration raises, an array of objects or strings) is a note on the sampler (FAIL, naming what came
back and the error), in every mode: never a raw torch error from inside the kit, and never a
"sampler raised" line when the sampler returned. What the command line catches outside the
sampler's guarded calls is not blamed on the sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import spectheory.testing as T
from spectheory.testing import check_proposal, check_sampler, make_sampler

GOOD = make_sampler("block")


class Bomb(tuple):
    def __iter__(self):
        raise RuntimeError("iter bomb")


def _sparse(*a):
    acc, tok = GOOD(*a)
    return acc.to_sparse(), tok


def _nested(*a):
    import warnings

    acc, tok = GOOD(*a)
    with warnings.catch_warnings():  # torch's prototype-stage note on nested tensors
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([acc]), tok


def _bomb(*a):
    return Bomb(GOOD(*a))


def _objects(*a):
    acc, tok = GOOD(*a)
    return np.array(acc.tolist(), dtype=object), tok


@pytest.mark.parametrize("mode", ["law", "lossless"])
@pytest.mark.parametrize("sampler, note", [
    (_sparse, "returned accepted of layout torch.sparse_coo, not a dense tensor"),
    (_nested, "returned accepted as a nested tensor, not a dense tensor"),
    (_bomb, "returned a Bomb that cannot be read (RuntimeError: iter bomb)"),
    (_objects, "returned accepted of type ndarray (dtype object), not a tensor of integer ids"),
])
def test_chain_modes_note_an_unreadable_return(sampler, note, mode):
    rep = check_sampler(sampler, "block", samples=3000, mode=mode)
    assert not rep.passed and any(note in n for n in rep.notes), rep.notes


def test_proposal_and_tree_modes_too():
    def honest(q_rows, generator):
        return torch.multinomial(q_rows, 1, generator=generator)[:, 0], q_rows

    for bad, note in ((lambda q, g: Bomb(honest(q, g)), "cannot be read (RuntimeError: iter "
                                                       "bomb)"),
                      (lambda q, g: (honest(q, g)[0], honest(q, g)[1].to_sparse()),
                       "returned q_reported of layout torch.sparse_coo, not a dense tensor")):
        rep = check_proposal(bad, samples=3000)
        assert not rep.passed and any(note in n for n in rep.notes), rep.notes
    tree = T.tree_engine_sampler(T.tree_speculative_sampling_target_only, "sglang-tree")

    def sparse_tree(*a, **k):
        node, tok = tree(*a, **k)
        return node.to_sparse(), tok

    for bad, note in ((lambda *a, **k: Bomb(tree(*a, **k)), "cannot be read (RuntimeError: "
                                                           "iter bomb)"),
                      (sparse_tree, "returned node of layout torch.sparse_coo")):
        rep = T.check_tree_sampler(bad, "sglang-tree", samples=3000)
        assert not rep.passed and any(note in n for n in rep.notes), rep.notes


def test_the_command_line_blames_only_the_samplers_own_calls(monkeypatch, capsys, tmp_path):
    """A sampler that raises is named; an error outside its calls (planted in the check) is said
    to be outside them, exit 2 either way."""
    import sys

    from spectheory.cli import main
    from spectheory.testing.checks import sampler as kit

    (tmp_path / "usermod.py").write_text(
        "from spectheory.testing import make_sampler\n"
        "good = make_sampler('block')\n"
        "def raises(*a):\n    raise ValueError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("usermod", None)
    assert main(["check-sampler", "usermod:raises", "--samples", "3000"]) == 2
    assert "usermod:raises raised ValueError: boom" in capsys.readouterr().err

    def planted(*a, **k):
        raise RuntimeError("a fault of the check")

    monkeypatch.setattr(kit, "check_sampler", planted)
    assert main(["check-sampler", "usermod:good", "--samples", "3000"]) == 2
    err = capsys.readouterr().err
    assert "stopped on RuntimeError outside the sampler's calls: a fault of the check" in err
    assert "usermod:good raised" not in err


def test_draft_rows_from_lists_and_drafts_of_probability_zero():
    """DraftRows built from lists are read as tensors (the refusal said "not Instance or
    DraftRows, not DraftRows"); a drafted token its own q row gives probability 0 is refused
    (that row could never have been drafted: a PASS on it said nothing)."""
    from spectheory.runtime.errors import SpectheoryError
    from spectheory.testing import DraftRows

    p = [[[0.3, 0.7], [0.6, 0.4], [0.1, 0.9]]]
    ok = check_sampler(GOOD, "block", [DraftRows([[0, 1]], [[[.5, .5], [.5, .5]]], p)],
                       samples=3000)
    assert ok.passed
    with pytest.raises(SpectheoryError, match=r"the drafted token 1 \(row 0, path 0, position "
                                              r"1\) has probability 0 in its q row"):
        check_sampler(GOOD, "block", [DraftRows([[0, 1]], [[[1., 0.], [1., 0.]]], p)],
                      samples=3000)


@pytest.mark.parametrize("engine", ["hf", "mlx"])
def test_engine_replicas_under_greedy_decoding_state_their_detection_figure(engine):
    """Every instance's law one sequence: no chi-square has a degree of freedom, and the figure is
    that of a sample off the point, 1 - 0.1^(1/n) at 90% power (it was missing: inf / null)."""
    from spectheory.testing.statistics.stats import point_mass_tv

    if engine == "hf":
        pytest.importorskip("transformers")
        rep = T.check_hf_generate(samples=300, tokens=2, generate_kwargs={"min_p": 1.0})
    else:
        rep = T.check_mlx_generate(samples=300, tokens=2, kwargs={"temp": 0})
    assert rep.passed and rep.dof == 0
    assert rep.min_detectable_tv == pytest.approx(1 - 0.1 ** (1 / 300)) == point_mass_tv(300)
    assert rep.to_json()["detects"]["value"] == pytest.approx(rep.min_detectable_tv)
    assert sum("is one sequence (a point mass, as under greedy decoding" in n for n in rep.notes) == 1


def test_numpy_levels_are_read_as_numbers_everywhere():
    """alpha = np.float32(0.01) was refused ("not float32") where np.int64 samples were taken:
    every check reads numpy levels as numbers (and a bool, a string or 1 as before refused), and
    the report holds a Python float (its JSON is written)."""
    import json

    from spectheory.runtime.errors import SpectheoryError

    a = np.float32(0.01)
    rep = check_sampler(GOOD, "block", samples=np.int64(3000), alpha=a)
    assert rep.passed and type(rep.alpha) is float and json.dumps(rep.to_json())
    step = T.check_step(T.vllm_v1_step, samples=4000, alpha=np.float64(0.01))
    assert type(step.alpha) is float
    tree = T.tree_engine_sampler(T.tree_speculative_sampling_target_only, "sglang-tree")
    assert type(T.check_tree_sampler(tree, "sglang-tree", samples=3000, alpha=a).alpha) is float
    for bad in (True, "0.01", 1, np.float64(1.0), float("nan")):
        with pytest.raises(SpectheoryError, match="alpha = .* must be a number strictly between"):
            check_sampler(GOOD, "block", samples=3000, alpha=bad)
        with pytest.raises(SpectheoryError, match="alpha = .* must be a number strictly between"):
            T.check_step(T.vllm_v1_step, samples=4000, alpha=bad)
