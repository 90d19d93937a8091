"""Losslessness at scale: sample the batched verifier many times at a real context and test that
the law of the first two output tokens equals the target's.

At a context c, N independent iterations are run as batch rows of one drafted batch (N*K i.i.d.
draft paths), each verifier's law is sampled once per row, and the first two output tokens are
read off: (X_1, X_2) when tau >= 2, (X_1, Y) when tau = 1, and (Y, Z) with Z ~ p(.|c, Y) from a
target forward when tau = 0. Under a lossless verifier their joint law is
p(y1|c) p(y2|c, y1).

G-test (likelihood-ratio goodness of fit), G = 2 sum_bins O ln(O / E) with Williams' correction
(`spectheory.gpu_validation.stats.gtest`), against chi-square with (bins - 1) degrees of
freedom; bins are the categories with expected count >= 5 plus one
remainder bin with everything else:
* first token: every token y1 with N p(y1|c) >= 5, plus the remainder;
* pair: (y1, y2) for y1 among the first-token bins and N p(y1|c) p(y2|c,y1) >= 5, plus the rest.
Each verifier gets two (single-path: three) tests per context; the family-wise false-alarm
rate ``alpha`` is split evenly over all tests of lossless verifiers (Bonferroni), so a correct
implementation fails the whole run with probability at most ``alpha``. A deliberately lossy
verifier (the registered lossy control ``uniform-product``) is the negative control: it must be
rejected.

Third test, with more power per sample (single-path verifiers): the Rao-Blackwellised pair
law. For each drafted row the exact conditional probability of each pair bin given the draft is
read from the verifier's law (`spectheory.gpu_validation.stats.rb_pair_rows`); under losslessness
these i.i.d. vectors have mean p(y1|c) p(y2|c,y1), tested with Pearson's statistic on their mean
calibrated by their estimated covariance (Rao & Scott, JASA 76, 1981;
`spectheory.gpu_validation.stats.rao_scott_test`). Their covariance is at most the multinomial
one of the sampled pairs, so for large n this test has at least the power of Pearson's test of
the sampled pairs on the same bins.

Also reported, without a test: a Rao-Blackwellised estimate of the first-token law,
mean over rows of (1 - P(tau=0|X)) 1[X_1 = .] + P(tau=0|X) correction_0(.|X), and its total
variation distance to p(.|c) (low-variance evidence of the size of a bias).
"""

from __future__ import annotations

import copy
import sys
from collections import Counter
from dataclasses import dataclass, field

import torch

from spectheory.runtime.errors import SpectheoryError
from spectheory.law import Law
from spectheory.sampling import sample_law, sample_output

from ..atomic import write_json
from ..checks import check_float, check_int, check_seed, parse_name_list
from ..decoding import (SamplingConfig, SpeculativeDecoder, check_memory, draw_uniforms,
                        resolve_verifier)
from ..hf_models import ModelSpec
from ..stats import check_pair_bins, gtest, rao_scott_test, rb_pair_rows
from .config import check_out_file, stderr_log


def _snapshot(dec: SpeculativeDecoder):
    return [(copy.deepcopy(st.cache), list(st.pending)) for st in (dec.draft, dec.target)]


def _restore(dec: SpeculativeDecoder, snap) -> None:
    for st, (cache, pend) in zip((dec.draft, dec.target), snap):
        st.cache, st.pending = copy.deepcopy(cache), list(pend)


#: Rows per batched target forward of `target_rows` (each row holds a copy of the context's
#: KV cache).
TARGET_ROWS_BATCH = 256


@torch.no_grad()
def target_rows(dec: SpeculativeDecoder, snap, tokens, batch: int = TARGET_ROWS_BATCH) -> dict:
    """p(.|c, y) for each y in ``tokens`` (batched target forwards of at most ``batch`` rows on
    the context cache)."""
    tokens = sorted({int(t) for t in tokens})
    out = {}
    for s in range(0, len(tokens), batch):
        part = tokens[s: s + batch]
        cache, pend = copy.deepcopy(snap[1][0]), snap[1][1]
        st = type(dec.target)(dec.target.model, cache, list(pend))
        n = len(part)
        if st.cache is not None:
            st.cache.batch_repeat_interleave(n)
        ids = torch.cat([torch.tensor([pend] * n), torch.tensor(part).view(n, 1)], 1)
        probs = dec._probs(dec._forward(st, ids, keep=1)[:, -1])
        out.update({t: probs[i] for i, t in enumerate(part)})
        del st, cache
    return out


def pair_bins(dec, snap, p0, n: int, min_expected: float = 5.0):
    """Pair bins (y1, y2) with n p(y1|c) p(y2|c,y1) >= min_expected: (y1 [nb], y2 [nb],
    p(y2|c,y1) [nb])."""
    p0c = p0.double().cpu()
    first = torch.nonzero(p0c * n >= min_expected).flatten().tolist()
    rows = target_rows(dec, snap, first)
    y1, y2, pr = [], [], []
    check_pair_bins(len(first))
    for a in first:
        row = rows[a].double().cpu()
        for b in torch.nonzero(row * p0c[a] * n >= min_expected).flatten().tolist():
            y1.append(a)
            y2.append(b)
            pr.append(float(row[b]))
        check_pair_bins(len(y1))
    dev = p0.device
    return (torch.tensor(y1, dtype=torch.long, device=dev),
            torch.tensor(y2, dtype=torch.long, device=dev),
            torch.tensor(pr, dtype=torch.float64, device=dev))


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
    cdf_cache: dict = {}  # y1 -> cumulative sums of p(.|c, y1)
    done = 0
    bar = tqdm(total=n, desc="lossless samples", file=sys.stderr, disable=not progress)
    while done < n:
        m = min(chunk, n - done)
        _restore(dec, snap)
        prop = dec.propose(m * K, L, generator)
        if p0 is None:
            p0 = prop.p[0, 0].clone()
            y1b, y2b, prow_b = pair_bins(dec, snap, p0, n)
            dev = p0.device  # the sums stay on the device (the outer products are large)
            # the null mean p(y1|c) p(y2|c,y1); the sums are of the rows shifted by it
            expected = p0.double()[y1b] * prow_b
            rbp = {v: [torch.zeros(len(y1b), dtype=torch.float64, device=dev),
                       torch.zeros(len(y1b), len(y1b), dtype=torch.float64, device=dev)]
                   for v in verifiers}
        X = prop.drafts
        for name, spec in verifiers.items():
            if spec.single_path:
                if K != 1:
                    raise SpectheoryError(f"{name} is single-path: use K = 1")
                law = spec.law(X[:, None], prop.q[:, None], prop.p[:, None])
                law = Law(law.stop[:, 0], law.correction[:, 0])
                tau, y = sample_law(law, uniforms=draw_uniforms((m, 2), generator, X.device))
                k = torch.zeros_like(tau)
                stop0 = law.stop[:, 0]
                corr0 = law.correction[:, 0]
                x1 = X[:, 0]
                vrows = rb_pair_rows(X, law, y1b, y2b, prow_b).double() - expected
                rbp[name][0] += vrows.sum(0)
                rbp[name][1] += vrows.T @ vrows
            else:
                law = spec.law(X.view(m, K, L), prop.q.view(m, K, L, -1),
                               prop.p.view(m, K, L + 1, -1))
                k, tau, y = sample_output(law, uniforms=draw_uniforms((m, 2), generator,
                                                                      X.device))
                stop0 = law.stop[:, :, 0].sum(1)
                corr0 = (law.stop[:, :, :1] * law.correction[:, :, 0]).sum(1) / \
                    stop0.clamp(min=1e-300).unsqueeze(-1)
                x1 = None  # first token of the chosen path, below
            rows = torch.arange(m, device=X.device)
            Xr = X.view(m, K, L)[rows, k]  # chosen path per row
            first = torch.where(tau >= 1, Xr[:, 0], y)
            second = torch.where(tau >= 2, Xr[:, 1], y)
            # tau = 0: the second token is a fresh draw from p(.|c, y1), by inverse CDF
            # (`spectheory.sampling.inverse_cdf`), one vectorised draw per distinct y1
            zero = torch.nonzero(tau == 0).flatten()
            if zero.numel():
                f0 = first[zero]
                distinct = f0.unique().tolist()
                need = [t for t in distinct if t not in cdf_cache]
                cdf_cache.update({t: torch.cumsum(r, 0)
                                  for t, r in target_rows(dec, snap, need).items()})
                u = draw_uniforms(zero.numel(), generator, X.device)
                for t in distinct:
                    sel = f0 == t
                    cdf = cdf_cache[t]
                    second[zero[sel]] = torch.searchsorted(
                        cdf, (u[sel] * cdf[-1]).to(cdf.dtype), right=True).clamp(
                        max=cdf.shape[0] - 1).to(second.dtype)
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
            off = float((est.sum(-1) - 1).abs().max()) if m else 0.0
            if not off <= 1e-9:  # each row is a law of the first token given its drafts
                raise SpectheoryError(f"{name}: the Rao-Blackwellised first-token rows are not "
                                      f"laws (a row sums to 1 +- {off:.2g}); the law's stop "
                                      f"masses do not fit the drafts they were evaluated on")
            s = est.sum(0)
            rb[name] = s if rb[name] is None else rb[name] + s
        done += m
        bar.update(m)
    bar.close()
    rb = {v: (t / n) for v, t in rb.items()}
    rb_pair = {v: rao_scott_test(rbp[v][0].cpu(), rbp[v][1].cpu(), n, expected.cpu())
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
    if len(first_probs) < 2:  # one bin: the tests have no degree of freedom, they cannot reject
        second = sorted(p0c.tolist())[-2] if p0c.numel() > 1 else 0.0
        raise SpectheoryError(
            f"--samples {n:,}: fewer than two first tokens have an expected count of 5 at this "
            "context, so the G-tests have no degree of freedom and cannot reject anything"
            + (f"; use at least {int(-(-5 // second)):,} samples" if second > 0 else
               "; the target's first token is one token here: nothing to test"))
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
            "rb_first": rb[v].double().cpu().tolist(),  # the estimate the TV is of
        }
    return out


@dataclass(frozen=True)
class LosslessConfig:
    """Configuration of `run_lossless` (checked on construction, one-line errors).

    Parameters
    ----------
    models : ModelSpec
        The pair (default: the fetched Qwen2.5-Coder pair; ``smollm2-early-exit`` for a
        SmolLM2-135M target with an early-exit draft).
    sampling : SamplingConfig
        Temperature, top-k, top-p.
    verifiers : tuple of str
        Names or ``module:function``; known-lossy controls are negative controls (must be
        rejected).
    samples : int
        Iterations per context (batch rows).
    K, L : int
        Paths and block length (single-path verifiers need K = 1; the two-token test L >= 2).
    contexts : int
        Prompts used as contexts: the first ``contexts`` prompts of ``datasets``.
    datasets : str, tuple or None
        ``"humaneval:1"`` or its parsed form (`spectheory.gpu_validation.data.parse_datasets`),
        interleaved across data sets; None: HumanEval and ShareGPT alternating, ``contexts`` of
        each (only the data sets named are read).
    chunk : int
        Iterations per drafted batch.
    alpha : float
        Family-wise false-alarm rate in (0, 1), split (Bonferroni) over the tests of lossless
        verifiers.
    seed : int
        Seed of the prompt subset and of every draw.
    out : str or None
        JSON output file (written atomically).
    memory_limit_gib : float
        Refuse (before loading) a drafted batch (chunk x K paths) estimated above this size.
    """

    models: ModelSpec = field(default_factory=ModelSpec)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    verifiers: tuple = ("token", "block", "uniform-product")
    samples: int = 20000
    K: int = 1
    L: int = 4
    contexts: int = 2
    datasets: tuple | None = None
    chunk: int = 128
    alpha: float = 1e-3
    seed: int = 0
    out: str | None = None
    memory_limit_gib: float = 16.0

    def __post_init__(self):
        if isinstance(self.verifiers, str):
            object.__setattr__(self, "verifiers", parse_name_list("verifiers", self.verifiers))
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        if not self.verifiers or len(set(self.verifiers)) != len(self.verifiers):
            raise SpectheoryError("verifiers must be a non-empty list without repeats")
        check_int("samples", self.samples, 1, 10_000_000)
        check_int("K", self.K, 1, 1024)
        check_int("L", self.L, 2, 1024)
        check_int("contexts", self.contexts, 1, 1000)
        if self.datasets is not None:
            from ..data import format_datasets, parse_datasets

            object.__setattr__(self, "datasets", parse_datasets(
                self.datasets if isinstance(self.datasets, str) else
                format_datasets(self.datasets)))
            given = sum(n for _, n in self.datasets)
            if self.contexts > given:  # the run would test fewer contexts than asked, silently
                raise SpectheoryError(f"contexts = {self.contexts} is more than the {given} "
                                      f"prompt(s) datasets {format_datasets(self.datasets)} "
                                      f"gives; ask for fewer contexts or more prompts")
        check_int("chunk", self.chunk, 1, 1_000_000)
        check_float("alpha", self.alpha, 0, 1, lo_open=True, hi_open=True)
        check_seed(self.seed)
        check_float("memory limit (GiB)", self.memory_limit_gib, 0, None, lo_open=True)
        check_out_file(self.out)
        for name, spec in self.specs().items():
            if spec.single_path and self.K != 1:
                raise SpectheoryError(f"{name} is a single-path verifier: use K = 1")

    def specs(self) -> dict:
        return {v: resolve_verifier(v, allow_lossy=True) for v in self.verifiers}


def run_lossless(cfg: LosslessConfig, log=stderr_log) -> dict:
    """The tests of `lossless_test` at the first ``cfg.contexts`` prompts; the family-wise
    ``alpha`` is split over every test of every lossless verifier at every context. Returns
    {"models", "temperature", "contexts": [per-context results], "ok": all as expected} and
    writes it to ``cfg.out`` (atomically) when given."""
    from ..data import encode, load_prompts
    from ..forward_costs import machine_info
    from ..hf_models import load_models

    V = cfg.models.check()
    check_memory(min(cfg.chunk, cfg.samples) * cfg.K, cfg.L, V, cfg.memory_limit_gib,
                 "--chunk, --K or --L")
    datasets = cfg.datasets or (("humaneval", cfg.contexts), ("sharegpt", cfg.contexts))
    prompts = load_prompts(datasets, cfg.seed)[: cfg.contexts]
    pair = load_models(cfg.models)
    log(f"models: {pair.description}")
    dec = SpeculativeDecoder(pair.draft, pair.target, cfg.sampling, device=cfg.models.device)
    n_tests = 3 * len(prompts) * sum(s.lossless for s in cfg.specs().values())
    results = []
    g = torch.Generator().manual_seed(cfg.seed)
    for i, p in enumerate(prompts, 1):
        log(f"context {i}/{len(prompts)}: {p.dataset}-{p.index}")
        ids = encode(p, pair.tokenizer, 512)
        r = lossless_test(dec, ids, list(cfg.verifiers), cfg.samples, cfg.K, cfg.L, cfg.alpha,
                          n_tests, chunk=cfg.chunk, generator=g, progress=True)
        r.update({"dataset": p.dataset, "index": p.index})
        results.append(r)
    doc = {"models": pair.description, "temperature": cfg.sampling.temperature,
           "machine": machine_info(cfg.models.device), "contexts": results,
           "ok": all(res["ok"] for r in results for res in r["verifiers"].values())}
    if cfg.out:
        write_json(cfg.out, doc)
    return doc


def format_lossless(doc: dict) -> str:
    """One tab-separated line per (context, verifier)."""
    lines = []
    for r in doc["contexts"]:
        for v, res in r["verifiers"].items():
            rb = res["rb_pair"]["p_value"] if res["rb_pair"] else float("nan")
            lines.append(
                f"{r['dataset']}-{r['index']}\t{v}\tfirst p={res['first_token']['p_value']:.3g}"
                f" ({res['first_token']['bins']} bins)\tpair p={res['pair']['p_value']:.3g} "
                f"({res['pair']['bins']} bins)\trejected={res['rejected']}\tRB pair p={rb:.3g}"
                f"\t{'OK' if res['ok'] else 'UNEXPECTED'}\tRB-TV(first)={res['rb_tv_first']:.2e}")
    return "\n".join(lines)


__all__ = ["LosslessConfig", "run_lossless", "format_lossless", "lossless_test",
           "sample_two_tokens", "target_rows", "pair_bins"]
