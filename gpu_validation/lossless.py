"""Losslessness at scale: sample the batched verifier many times at a real context and test that
the law of the first two output tokens equals the target's.

At a context c, N independent iterations are run as batch rows of one drafted batch (N*K i.i.d.
draft paths), each verifier's law is sampled once per row, and the first two output tokens are
read off: (X_1, X_2) when tau >= 2, (X_1, Y) when tau = 1, and (Y, Z) with Z ~ p(.|c, Y) from a
target forward when tau = 0. Under a lossless verifier their joint law is
p(y1|c) p(y2|c, y1).

G-test (likelihood-ratio goodness of fit), G = 2 sum_bins O ln(O / E), against chi-square with
(bins - 1) degrees of freedom; bins are the categories with expected count >= 5 plus one
remainder bin with everything else:
* first token: every token y1 with N p(y1|c) >= 5, plus the remainder;
* pair: (y1, y2) for y1 among the first-token bins and N p(y1|c) p(y2|c,y1) >= 5, plus the rest.
Each verifier gets two (single-path: three) tests per context; the family-wise false-alarm rate ``alpha`` is split
evenly over all tests of lossless verifiers (Bonferroni), so a correct implementation fails the
whole run with probability at most ``alpha``. A deliberately lossy verifier
(the registered lossy control ``uniform-product``) is the negative control: it must be rejected.

Third test, with far more power per sample (single-path verifiers): the Rao-Blackwellised pair
law. For each drafted row the exact conditional probability of each pair bin given the draft is
read from the verifier's law (:func:`rb_pair_rows`); under losslessness these i.i.d. vectors have
mean p(y1|c) p(y2|c,y1), tested with a large-sample Hotelling T^2 (:func:`hotelling`).

Also reported, without a test: a Rao-Blackwellised estimate of the first-token law,
mean over rows of (1 - P(tau=0|X)) 1[X_1 = .] + P(tau=0|X) correction_0(.|X), and its total
variation distance to p(.|c) (low-variance evidence of the size of a bias).
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections import Counter

import numpy as np
import torch


from spectheory.errors import SpectheoryError
from spectheory.law import Law
from spectheory.sampling import sample_law, sample_output

from .decoding import SpeculativeDecoder, resolve_verifier


def gtest(observed: Counter, expected_probs: dict, n: int, min_expected: float = 5.0) -> dict:
    """G-test of counts ``observed`` (category -> count, total n) against the probabilities
    ``expected_probs`` (category -> probability, need not cover everything: the uncovered mass is
    the remainder bin). Categories with expected count < ``min_expected`` join the remainder."""
    from scipy.stats import chi2

    kept = [c for c, pr in expected_probs.items() if pr * n >= min_expected]
    E = np.array([expected_probs[c] * n for c in kept], dtype=np.float64)
    O = np.array([observed.get(c, 0) for c in kept], dtype=np.float64)
    rest_E = n - E.sum()
    rest_O = n - O.sum()
    if rest_E >= 1e-9 * n:
        E = np.append(E, rest_E)
        O = np.append(O, rest_O)
    elif rest_O > 0:  # observed outside the support of the expected law
        return {"G": math.inf, "dof": len(E), "p_value": 0.0, "bins": len(E) + 1}
    nz = O > 0
    G = float(2.0 * np.sum(O[nz] * np.log(O[nz] / E[nz])))
    dof = max(len(E) - 1, 1)
    return {"G": G, "dof": dof, "p_value": float(chi2.sf(G, dof)), "bins": int(len(E))}


def _snapshot(dec: SpeculativeDecoder):
    return [(copy.deepcopy(st.cache), list(st.pending)) for st in (dec.draft, dec.target)]


def _restore(dec: SpeculativeDecoder, snap) -> None:
    for st, (cache, pend) in zip((dec.draft, dec.target), snap):
        st.cache, st.pending = copy.deepcopy(cache), list(pend)


@torch.no_grad()
def target_rows(dec: SpeculativeDecoder, snap, tokens) -> dict:
    """p(.|c, y) for each y in ``tokens`` (one batched target forward on the context cache)."""
    tokens = sorted({int(t) for t in tokens})
    if not tokens:
        return {}
    cache, pend = copy.deepcopy(snap[1][0]), snap[1][1]
    st = type(dec.target)(dec.target.model, cache, list(pend))
    n = len(tokens)
    if st.cache is not None:
        st.cache.batch_repeat_interleave(n)
    ids = torch.cat([torch.tensor([pend] * n), torch.tensor(tokens).view(n, 1)], 1)
    probs = dec._probs(dec._forward(st, ids, keep=1)[:, -1])
    return {t: probs[i] for i, t in enumerate(tokens)}


def pair_bins(dec, snap, p0, n: int, min_expected: float = 5.0):
    """Pair bins (y1, y2) with n p(y1|c) p(y2|c,y1) >= min_expected: (y1 [nb], y2 [nb],
    p(y2|c,y1) [nb])."""
    p0c = p0.double().cpu()
    first = torch.nonzero(p0c * n >= min_expected).flatten().tolist()
    rows = target_rows(dec, snap, first)
    y1, y2, pr = [], [], []
    for a in first:
        row = rows[a].double().cpu()
        for b in torch.nonzero(row * p0c[a] * n >= min_expected).flatten().tolist():
            y1.append(a)
            y2.append(b)
            pr.append(float(row[b]))
    dev = p0.device
    return (torch.tensor(y1, dtype=torch.long, device=dev),
            torch.tensor(y2, dtype=torch.long, device=dev),
            torch.tensor(pr, dtype=torch.float64, device=dev))


def rb_pair_rows(X, law, y1b, y2b, prow_b):
    """Per drafted row, the exact conditional probability (given the draft) that the first two
    output tokens fall in each pair bin (single-path law, L >= 2):
    P(tau>=2) 1[X1X2 = y1y2] + P(tau=1) 1[X1 = y1] corr_1(y2) + P(tau=0) corr_0(y1) p(y2|c,y1).
    Their mean over rows is an unbiased (Rao-Blackwellised) estimate of the output pair law."""
    st, corr = law.stop, law.correction
    x1, x2 = X[:, 0:1], X[:, 1:2]
    a = st[:, 2:].sum(1, keepdim=True) * ((x1 == y1b) & (x2 == y2b)).to(st.dtype)
    b = st[:, 1:2] * (x1 == y1b).to(st.dtype) * corr[:, 1][:, y2b]
    c = st[:, 0:1] * corr[:, 0][:, y1b] * prow_b.to(st.dtype)
    return a + b + c


def hotelling(total, outer, n: int, expected) -> dict:
    """Large-sample test that the mean of i.i.d. vectors equals ``expected``: T^2 =
    n d' S^+ d with d = mean - expected and S the sample covariance (pseudo-inverse), against
    chi-square with rank(S) degrees of freedom."""
    from scipy.stats import chi2

    mean = total / n
    cov = (outer - n * torch.outer(mean, mean)) / max(n - 1, 1)
    d = mean - expected
    evals, evecs = torch.linalg.eigh(cov)
    keep = evals > evals.max() * 1e-10
    proj = evecs[:, keep].T @ d
    T2 = float(n * (proj ** 2 / evals[keep]).sum())
    dof = int(keep.sum())
    return {"T2": T2, "dof": dof, "p_value": float(chi2.sf(T2, max(dof, 1))),
            "tv_bins": float(0.5 * d.abs().sum())}


@torch.no_grad()
def sample_two_tokens(dec: SpeculativeDecoder, prompt_ids, verifiers: dict, n: int, K: int,
                      L: int, chunk: int, generator: torch.Generator, progress: bool = False):
    """For each verifier name -> VerifierSpec: n samples of the first two output tokens, all
    verifiers on the same drafted batches (independent uniforms). Returns (pairs per verifier,
    p(.|c), Rao-Blackwellised first-token law per verifier, snapshot)."""
    from tqdm import tqdm

    if L < 2:
        raise SpectheoryError("the two-token test needs L >= 2")
    dec.start(prompt_ids)
    snap = _snapshot(dec)
    pairs = {v: [] for v in verifiers}
    rb = {v: None for v in verifiers}
    p0 = None
    row_cache: dict = {}
    done = 0
    bar = tqdm(total=n, desc="lossless samples", file=sys.stderr, disable=not progress)
    while done < n:
        m = min(chunk, n - done)
        _restore(dec, snap)
        prop = dec.propose(m * K, L, generator)
        if p0 is None:
            p0 = prop.p[0, 0].clone()
            y1b, y2b, prow_b = pair_bins(dec, snap, p0, n)
            rbp = {v: [torch.zeros(len(y1b), dtype=torch.float64),
                       torch.zeros(len(y1b), len(y1b), dtype=torch.float64)] for v in verifiers}
        X = prop.drafts
        for name, spec in verifiers.items():
            if spec.single_path:
                if K != 1:
                    raise SpectheoryError(f"{name} is single-path: use K = 1")
                law = spec.law(X[:, None], prop.q[:, None], prop.p[:, None])
                law = Law(law.stop[:, 0], law.correction[:, 0])
                tau, y = sample_law(law, generator)
                k = torch.zeros_like(tau)
                stop0 = law.stop[:, 0]
                corr0 = law.correction[:, 0]
                x1 = X[:, 0]
                vrows = rb_pair_rows(X, law, y1b, y2b, prow_b).double().cpu()
                rbp[name][0] += vrows.sum(0)
                rbp[name][1] += vrows.T @ vrows
            else:
                law = spec.law(X.view(m, K, L), prop.q.view(m, K, L, -1),
                               prop.p.view(m, K, L + 1, -1))
                k, tau, y = sample_output(law, generator)
                stop0 = law.stop[:, :, 0].sum(1)
                corr0 = (law.stop[:, :, :1] * law.correction[:, :, 0]).sum(1) / \
                    stop0.clamp(min=1e-300).unsqueeze(-1)
                x1 = None  # first token of the chosen path, below
            rows = torch.arange(m, device=X.device)
            Xr = X.view(m, K, L)[rows, k]  # chosen path per row
            first = torch.where(tau >= 1, Xr[:, 0], y)
            second = torch.where(tau >= 2, Xr[:, 1], y)
            need = [int(t) for t in first[tau == 0].tolist() if int(t) not in row_cache]
            row_cache.update(target_rows(dec, snap, need))
            for i in torch.nonzero(tau == 0).flatten().tolist():
                u = torch.rand(1, generator=generator, dtype=torch.float64)
                row = row_cache[int(first[i])]
                second[i] = int(torch.searchsorted(torch.cumsum(row, 0),
                                                   u.to(row.device) * row.sum()).clamp(
                    max=row.shape[0] - 1))
            pairs[name].extend(zip(first.tolist(), second.tolist()))
            # Rao-Blackwellised first-token law
            if spec.single_path:
                est = (1 - stop0).unsqueeze(-1) * torch.nn.functional.one_hot(
                    x1, p0.shape[-1]).to(corr0.dtype) + stop0.unsqueeze(-1) * corr0
            else:
                Xk = X.view(m, K, L)[:, :, 0]
                adv = law.stop[:, :, 1:].sum(-1)  # P(path k, tau >= 1)
                est = torch.zeros(m, p0.shape[-1], dtype=corr0.dtype, device=corr0.device)
                est.scatter_add_(1, Xk, adv.to(est.dtype))
                est = est + stop0.unsqueeze(-1) * corr0
            s = est.sum(0)
            rb[name] = s if rb[name] is None else rb[name] + s
        done += m
        bar.update(m)
    bar.close()
    rb = {v: (t / n) for v, t in rb.items()}
    expected = (p0.double().cpu()[y1b.cpu()] * prow_b.double().cpu())
    rb_pair = {v: hotelling(rbp[v][0], rbp[v][1], n, expected)
               for v, spec in verifiers.items() if spec.single_path}
    return pairs, p0, rb, snap, rb_pair


def lossless_test(dec: SpeculativeDecoder, prompt_ids, verifier_names, n: int, K: int, L: int,
                  alpha: float, n_lossless_tests: int | None = None, chunk: int = 64,
                  generator: torch.Generator | None = None, progress: bool = False) -> dict:
    """Run the two G-tests per verifier at one context. Verifiers whose name is a lossy example
    are negative controls (``expect_lossless`` False). ``n_lossless_tests`` is the number of tests
    the family-wise ``alpha`` is split over (default: the ones run here)."""

    verifiers = {v: resolve_verifier(v, allow_lossy=True) for v in verifier_names}
    pairs, p0, rb, snap, rb_pair = sample_two_tokens(dec, prompt_ids, verifiers, n, K, L, chunk,
                                            generator or torch.Generator().manual_seed(0),
                                            progress)
    n_tests = n_lossless_tests or 3 * sum(resolve_verifier(v, allow_lossy=True).lossless
                                          for v in verifier_names)
    level = alpha / max(n_tests, 1)
    p0c = p0.double().cpu()
    first_probs = {i: float(p0c[i]) for i in torch.nonzero(p0c * n >= 5).flatten().tolist()}
    rows = target_rows(dec, snap, first_probs)
    pair_probs = {}
    for y1, row in rows.items():
        row = row.double().cpu()
        for y2 in torch.nonzero(row * first_probs[y1] * n >= 5).flatten().tolist():
            pair_probs[(y1, y2)] = first_probs[y1] * float(row[y2])
    out = {"samples": n, "K": K, "L": L, "alpha_familywise": alpha, "level_per_test": level,
           "verifiers": {}}
    for v in verifier_names:
        obs_first = Counter(a for a, _ in pairs[v])
        obs_pair = Counter(pairs[v])
        t1 = gtest(obs_first, first_probs, n)
        t2 = gtest(obs_pair, pair_probs, n)
        lossless = verifiers[v].lossless
        t3 = rb_pair.get(v)
        rej = t1["p_value"] < level or t2["p_value"] < level or \
            (t3 is not None and t3["p_value"] < level)
        out["verifiers"][v] = {
            "expect_lossless": lossless, "first_token": t1, "pair": t2, "rb_pair": t3,
            "rejected": rej,
            "ok": (not rej) if lossless else rej,
            "rb_tv_first": float(0.5 * (rb[v].double().cpu() - p0c).abs().sum()),
        }
    return out


def lossless_command(args) -> int:
    """``spectheory validate lossless``: the G-tests at the first ``--contexts`` prompts."""
    from .data import encode, load_prompts
    from .decoding import SamplingConfig
    from .hf_models import load_models_for

    names = args.verifiers.split(",")
    for v in names:
        resolve_verifier(v, allow_lossy=True)
    d, t, tok, desc = load_models_for(args)
    dec = SpeculativeDecoder(d, t, SamplingConfig(args.temperature, args.top_k, args.top_p),
                             device=args.device)
    prompts = load_prompts(f"humaneval:{args.contexts},sharegpt:{args.contexts}", args.seed)
    prompts = prompts[: args.contexts]
    n_tests = 3 * len(prompts) * sum(resolve_verifier(v, allow_lossy=True).lossless
                                     for v in names)
    results = []
    g = torch.Generator().manual_seed(args.seed)
    for p in prompts:
        ids = encode(p, tok, 512)
        r = lossless_test(dec, ids, names, args.samples, args.K, args.L, args.alpha, n_tests,
                          chunk=args.chunk, generator=g, progress=True)
        r.update({"dataset": p.dataset, "index": p.index})
        results.append(r)
    doc = {"models": desc, "temperature": args.temperature, "contexts": results}
    if args.out:
        from pathlib import Path
        from .run import write_json
        write_json(Path(args.out), doc)
    for r in results:
        for v, res in r["verifiers"].items():
            print(f"{r['dataset']}-{r['index']}\t{v}\tfirst p={res['first_token']['p_value']:.3g}"
                  f" ({res['first_token']['bins']} bins)\tpair p={res['pair']['p_value']:.3g} "
                  f"({res['pair']['bins']} bins)\trejected={res['rejected']}\t"
                  f"RB pair p={res['rb_pair']['p_value'] if res['rb_pair'] else float('nan'):.3g}\t"
                  f"{'OK' if res['ok'] else 'UNEXPECTED'}\tRB-TV(first)={res['rb_tv_first']:.2e}")
    return 0 if all(res["ok"] for r in results for res in r["verifiers"].values()) else 1
