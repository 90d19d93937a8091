"""Every registered verifier's law function, called directly (not through
``VerifierSpec.law``), refuses in one line drafted token ids outside the vocabulary and
arguments whose shapes do not fit its form, as the registry's check does: before, an id past V
or a negative id was a raw torch index error from inside the law, the optimal-transport rules
(hu, hu-norep, khisti, global-resolution), which look their tokens up in a table, returned a
law for tokens that do not exist, and a batch of one draft against rows of two, or p over
another vocabulary, gave a broadcast law or one of mixed rows."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from spectheory.registry import get_verifier, registered
from spectheory.runtime import backend as B
from spectheory.runtime.errors import InputError

V = 5


def _rows(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=g, dtype=torch.float64), -1)


def _inputs(multi: bool):
    """q, p of two drafts of L = 2 over V = 5 tokens; K = 2 paths with shared root rows for a
    multi-path verifier (the paths share their first token, so their first rows agree)."""
    if not multi:
        return _rows((2, 2, V), 0), _rows((2, 3, V), 1)
    q = _rows((2, 1, 2, V), 0).expand(2, 2, 2, V).clone()
    p = _rows((2, 1, 3, V), 1).expand(2, 2, 3, V).clone()
    return q, p


def _bad_drafts(multi: bool):
    """Ids V (the first past the vocabulary) and -1, away from the first position and
    (multi-path) the first path: a check of path 1 or position 0 alone misses them."""
    if not multi:
        return [[[0, V], [1, 2]], [[0, 1], [1, -1]]]
    return [[[[0, V], [0, 2]], [[0, 1], [0, 2]]], [[[0, 1], [0, 2]], [[0, 1], [0, -1]]]]


@pytest.mark.parametrize("name", registered())
def test_bare_law_refuses_ids_outside_the_vocabulary(name):
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    for drafts in _bad_drafts(multi):
        lo, hi = min(np.ravel(drafts)), max(np.ravel(drafts))
        for backend in ("torch", "numpy"):
            d = torch.tensor(drafts) if backend == "torch" else np.array(drafts)
            qq, pp = (q, p) if backend == "torch" else (q.numpy(), p.numpy())
            try:
                spec.function(d, qq, pp)
            except InputError as exc:  # GBV's own check names the first bad id
                want = (f"GBV: draft tokens must lie in 0..{V - 1} (V = {V}); found "
                        f"{hi if hi >= V else lo}" if name.startswith("gbv") else
                        f"verifier law: a drafted token lies outside 0..{V - 1} (min {lo}, "
                        f"max {hi})")
                assert str(exc) == want, (name, backend, exc)
            except TypeError as exc:  # a float (torch) law only: refused before any id is read
                assert backend == "numpy" and "law only" in str(exc), (name, exc)
            else:
                pytest.fail(f"{name} ({backend}) gave a law for drafts {drafts}")


@pytest.mark.parametrize("name", ["token", "block", "hu", "khisti", "specinfer", "spechub",
                                  "traversal-tree", "global-resolution", "block-first"])
def test_bare_law_of_valid_ids_is_the_checked_law(name):
    """The check refuses nothing valid: ids 0 and V - 1 give the law the registry's checked call
    (`VerifierSpec.__call__`) gives, in floats and in exact rationals."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    drafts = ([[[0, V - 1], [0, 2]], [[3, 1], [3, 0]]] if multi else [[0, V - 1], [V - 1, 0]])
    got, want = spec.function(torch.tensor(drafts), q, p), spec(torch.tensor(drafts), q, p)
    assert torch.equal(got.stop, want.stop) and torch.equal(got.correction, want.correction)
    fq = B.to_exact([[Fraction(round(float(x) * 64) + 1, 1) for x in r] for r in q.reshape(-1, V)])
    fp = B.to_exact([[Fraction(round(float(x) * 64) + 1, 1) for x in r] for r in p.reshape(-1, V)])
    fq = (fq / fq.sum(axis=-1, keepdims=True)).reshape(q.shape)
    fp = (fp / fp.sum(axis=-1, keepdims=True)).reshape(p.shape)
    got, want = spec.function(np.array(drafts), fq, fp), spec(np.array(drafts), fq, fp)
    assert (got.stop == want.stop).all() and (got.correction == want.correction).all()
    assert isinstance(got.stop.ravel()[0], Fraction)


def _shape_cases(multi: bool):
    """Arguments whose shapes do not fit the law's form (name, drafts, q, p): p over another
    vocabulary, p without its last position, drafts longer than the rows, a batch of one
    against rows of two, the single-path form given to a multi-path law and the reverse."""
    if multi:
        q, p = _inputs(True)
        d = torch.tensor([[[0, 1], [0, 2]], [[3, 1], [3, 0]]])
        p6 = torch.softmax(torch.randn(2, 1, 3, V + 1, dtype=torch.float64), -1)
        return [("p over V + 1", d, q, p6.expand(2, 2, 3, V + 1).clone()),
                ("p without its last position", d, q, p[:, :, :2]),
                ("p of one path", d, q, p[:, :1]),
                ("p of a batch of one", d, q, p[:1]),
                ("longer drafts", torch.cat([d, d[..., :1]], -1), q, p),
                ("a batch of one", d[:1], q, p),
                ("q of one path", d, q[:, :1], p),
                ("the single-path form", d[:, 0], q[:, 0], p[:, 0])]
    q, p = _inputs(False)
    d = torch.tensor([[0, 1], [3, 4]])
    return [("p over V + 1", d, q, torch.softmax(torch.randn(2, 3, V + 1,
                                                          dtype=torch.float64), -1)),
            ("p without its last position", d, q, p[:, :2]),
            ("p of a batch of one", d, q, p[:1]),
            ("longer drafts", torch.cat([d, d[:, :1]], -1), q, p),
            ("a batch of one", d[:1], q, p),
            ("the multi-path form", d[:, None], q[:, None], p[:, None])]


@pytest.mark.parametrize("name", registered())
def test_bare_law_refuses_shapes_that_do_not_fit(name):
    """Before, a batch of one draft against rows of two broadcast one law over the batch, and
    p over another vocabulary gave a law of mixed rows (greedy, the relaxed rules, typical
    acceptance) or a raw error from inside the law."""
    spec = get_verifier(name)
    for what, d, q, p in _shape_cases(not spec.single_path):
        if name == "ngram" and what == "p over V + 1":
            continue  # ngram reads no q: only p's vocabulary counts
        try:
            spec.function(d, q, p)
        except InputError as exc:
            assert re.search(r"do not fit drafts \[B, (K, )?L\]|shapes do not line up|p and q "
                             r"rows must have one|must be an array of", str(exc)), (what, exc)
        else:
            pytest.fail(f"{name} gave a law for {what}")


@pytest.mark.parametrize("name", registered())
def test_bare_law_of_an_empty_batch_is_empty(name):
    """B = 0: an empty law of the form's shapes (a raw torch.cat or broadcast error from inside
    token, block, ngram, GBV, the traversals, the optimal-transport rules before)."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    d = torch.zeros((0, 2, 2) if multi else (0, 2), dtype=torch.long)
    for backend in ("torch", "numpy"):
        args = (d, q[:0], p[:0]) if backend == "torch" else (d.numpy(), q[:0].numpy(),
                                                             p[:0].numpy())
        try:
            law = spec.function(*args)
        except TypeError as exc:  # a float (torch) law only
            assert backend == "numpy" and "law only" in str(exc), (name, exc)
            continue
        assert tuple(law.stop.shape) == tuple(d.shape[:-1]) + (3,), (name, backend)
        assert tuple(law.correction.shape) == tuple(args[2].shape), (name, backend)


@pytest.mark.parametrize("name", registered())
def test_bare_law_refuses_rows_that_are_not_real_numbers(name):
    """Complex rows failed inside torch's comparisons or sorts; integer and boolean rows gave a
    law of 0/1 weights."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    d = torch.zeros(q.shape[:-1], dtype=torch.long)
    for what, qq, pp in [("q", q.to(torch.complex128), p), ("p", q, (p > 0.3)),
                         ("p", q.numpy(), p.numpy().astype(np.int64))]:
        if name == "ngram" and what == "q":
            continue  # ngram reads no q
        dd = d.numpy() if isinstance(pp, np.ndarray) else d
        try:
            spec.function(dd, qq, pp)
        except InputError as exc:
            assert re.search(rf"{what} rows are .*; probabilities are floating-point numbers or "
                             "exact Fractions", str(exc)), (name, exc)
        except TypeError as exc:  # a float (torch) law only, refused before its rows are read
            assert isinstance(pp, np.ndarray) and "law only" in str(exc), (name, exc)
        else:
            pytest.fail(f"{name} gave a law for {what} rows of {getattr(qq, 'dtype', '')}, "
                        f"{pp.dtype}")


@pytest.mark.parametrize("name", registered())
def test_bare_law_refuses_no_drafts_narrow_ids_and_meta_tensors(name):
    """L = 0 gave an empty stop table beside one correction row (greedy, the relaxed and
    cascade rules) or an IndexError (the multi-path rules); uint8 ids failed in torch's gather
    (specinfer, spectr, spechub, traversal-tree); meta tensors failed in the ids' reductions."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    lead = q.shape[:-2]
    empty = (torch.zeros(*lead, 0, dtype=torch.long), q[..., :0, :], p[..., :1, :])
    narrow = (torch.zeros(*lead, 2, dtype=torch.uint8), q, p)
    meta = tuple(x.to("meta") for x in (torch.zeros(*lead, 2, dtype=torch.long), q, p))
    for what, args, words in [("L = 0", empty, "drafts of L = 0 tokens"),
                              ("uint8 ids", narrow, "torch token ids are int32 or int64"),
                              ("meta tensors", meta, "not meta tensors")]:
        if name.startswith("gbv") and what == "uint8 ids":
            continue  # GBV reads whole-number ids of any type
        try:
            spec.function(*args)
        except InputError as exc:
            assert words in str(exc) or (name.startswith("gbv") and what == "L = 0"), \
                (name, what, exc)
        else:
            pytest.fail(f"{name} gave a law for {what}")


@pytest.mark.parametrize("name", ["hu", "hu-norep", "khisti", "global-resolution"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_optimal_transport_rules_refuse_rows_that_are_not_finite(name, bad):
    """They read float rows as exact rationals: a NaN or an infinity was a raw ValueError or
    OverflowError from Fraction."""
    q, p = _inputs(True)
    p[0, :, 0, 0] = bad
    d = torch.tensor([[[0, 1], [0, 2]], [[1, 1], [1, 0]]])
    with pytest.raises(InputError, match=rf"a row holds {bad}: the optimal-transport rules read "
                                         r"the rows as exact rationals"):
        get_verifier(name, multi_path=True).function(d, q, p)


@pytest.mark.parametrize("name", registered())
def test_bare_law_refuses_torch_and_numpy_mixed(name):
    """drafts, q and p of two array libraries: torch's gather of a numpy index, or a comparison
    of a tensor with an array, failed inside torch or numpy (TypeError, AttributeError) naming
    neither argument; now one line of the check. GBV converts its drafts and checks q and p
    itself; the float (torch) laws refuse numpy anywhere as theirs."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    d = torch.zeros(tuple(q.shape[:-1]), dtype=torch.long)
    reads_q = name != "ngram"
    for args in ((d.numpy(), q, p), (d, q.numpy(), p), (d, q, p.numpy())):
        if not reads_q and args[1] is not q:
            continue  # q is not read: a numpy q changes nothing
        if name.startswith("gbv") and args[0] is not d:
            continue  # GBV takes numpy ids with tensor rows (its own conversion)
        with pytest.raises((InputError, TypeError)) as exc:
            spec.function(*args)
        msg = str(exc.value)
        if exc.type is TypeError:
            assert "law only" in msg, (name, msg)
        elif name.startswith("gbv"):
            assert msg == "GBV: q and p must both be torch tensors or both numpy arrays", msg
        else:
            kinds = ", ".join(f"{type(x).__module__.partition('.')[0]}.{type(x).__name__}"
                              for x in (args if reads_q else (args[0], args[2])))
            assert msg == (f"verifier law: {'drafts, q and p' if reads_q else 'drafts and p'} "
                           f"must all be torch tensors or all numpy arrays, got {kinds}"), msg


@pytest.mark.parametrize("name", registered())
def test_bare_law_on_numpy_floats_is_the_torch_law(name):
    """A law function given numpy float rows returns the law it gives on the same rows as torch
    tensors (a numpy law), or refuses numpy as a float (torch) law only: spectr-gbv called
    ``.to`` on numpy rows (AttributeError). Shared first tokens on multi-path drafts."""
    spec = get_verifier(name)
    multi = not spec.single_path
    q, p = _inputs(multi)
    drafts = torch.tensor([[[0, V - 1], [0, 2]], [[3, 1], [3, 0]]] if multi else
                          [[0, V - 1], [V - 1, 0]])
    want = spec.function(drafts, q, p)
    try:
        got = spec.function(drafts.numpy(), q.numpy(), p.numpy())
    except TypeError as exc:
        assert "law only" in str(exc), (name, exc)
        return
    for a, b in zip(got, want):
        assert isinstance(a, np.ndarray) and a.dtype == np.float64, (name, type(a))
        assert np.allclose(a, b.numpy(), rtol=0, atol=1e-12), name
