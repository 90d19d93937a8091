"""Numerics audit: a verifier's law in bfloat16, float16 and float32 against float64.

Engines evaluate verifiers in low precision on rows of the size of a real vocabulary, and several
lossiness bugs are precision bugs (a skewed law that underflows to its fallback in float16, a
``log(1 - r)`` where ``log1p(-r)`` was needed). [`audit`][spectheory.cli.audit.audit] evaluates a
registered verifier on synthetic real-model-shaped rows (V = 151,936 by default) in each dtype and
compares it with the same computation in float64 *on the same rounded inputs* (so that the error
measured is the computation's, not the rounding of p and q), and reports

* ``stop_error``: max |P_d(k, tau = i | X) - P_64(k, tau = i | X)|;
* ``output_tv``: the largest total variation, over batch rows, between the joint laws of
  (path, tau, Y) given the drafts, J(k, i, y) = P(k, tau = i | X) correction_{k,i}(y);
* ``invalid``: NaN, infinite or negative entries, and the largest |sum of a stop row - 1|;
* ``steps``: for the built-in token, block and GBV verifiers, the largest relative error of each
  formula step (token: the ratios a_i; block: the weights w_i, residual masses S_i and acceptance
  weights h_i; GBV: the skewed rows q^G and the number of nodes whose skew denominator underflowed
  to zero, where the law silently falls back to q), and which step loses the most;
* ``input_rounding_tv``: the same output TV against float64 on the *unrounded* rows.

[`log1p_check`][spectheory.cli.audit.log1p_check] measures the log-space correction of engines (vLLM's
block sampler draws the correction by Gumbel-max over log(w p) + log1p(-q / (w p))): the TV of the
correction it implies in float32 with ``log1p`` and with ``log(1 - r)``, against the exact residual.

Row kinds ([`audit_rows`][spectheory.cli.audit.audit_rows]): ``flat`` (logits N(0, 1): every probability
near 1/V), ``peaked`` (logits N(0, 1) x 8: a few tokens hold the mass), ``tiny-q`` (peaked target;
the draft puts probability ~1e-30 on a random third of the vocabulary, including tokens the target
favours). The draft is the target's logits plus N(0, 0.5^2) noise; drafted tokens are drawn from q,
the K paths' first tokens distinct (so that paths never share a prefix with different rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from ..runtime._lazy import is_tensor, torch

from ..runtime import limits
from ..runtime.errors import SpectheoryError, result_stream
from ..inputs.random_instances import check_seed
from ..law import Law
from ..registry import get_verifier

#: dtypes audited, by name (``getattr(torch, name)``).
DTYPES = ("bfloat16", "float16", "float32", "float64")
ROW_KINDS = ("flat", "peaked", "tiny-q")
#: Refuse audits whose float64 rows would exceed this many bytes (about 12 copies are alive).
MAX_AUDIT_BYTES = 6 * 2**30


def audit_rows(kind: str, V: int, batch: int, paths: int, length: int, seed: int = 0):
    """Synthetic rows (module doc): drafts [B, K, L], q [B, K, L, V], p [B, K, L+1, V] float64."""
    if kind not in ROW_KINDS:
        raise SpectheoryError(f"unknown row kind {kind!r}; choose from {', '.join(ROW_KINDS)}")
    if paths > V:
        raise SpectheoryError(f"{paths} paths need distinct first tokens: at most V = {V}")
    seed = check_seed(seed)  # torch's generator overflows outside 64 bits
    g = torch.Generator().manual_seed(seed)
    shape = (batch, paths, length + 1, V)
    logits = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind != "flat":
        logits = logits * 8.0
    logits[:, :, 0] = logits[:, :1, 0]  # one root row per batch row
    p = torch.softmax(logits, dim=-1)
    ql = logits[:, :, :length] + 0.5 * torch.randn((batch, paths, length, V), generator=g,
                                                  dtype=torch.float64)
    ql[:, :, 0] = ql[:, :1, 0]
    q = torch.softmax(ql, dim=-1)
    if kind == "tiny-q":
        mask = torch.rand((batch, 1, 1, V), generator=g, dtype=torch.float64) < 1 / 3
        q = torch.where(mask, torch.full_like(q, 1e-30), q)
        q = q / q.sum(-1, keepdim=True)
    drafts = torch.empty((batch, paths, length), dtype=torch.long)
    for b in range(batch):
        first = torch.multinomial(q[b, 0, 0], paths, replacement=False, generator=g)
        drafts[b, :, 0] = first
        for k in range(paths):
            if length > 1:
                drafts[b, k, 1:] = torch.multinomial(q[b, k, 1:], 1, generator=g)[:, 0]
    return drafts, q, p


def _joint(law: Law) -> torch.Tensor:
    stop, corr = law
    return (stop.unsqueeze(-1) * corr).reshape(stop.shape[0], -1)


def output_tv(a: Law, b: Law) -> torch.Tensor:
    """Per batch row: TV between the joint laws of (path, tau, Y) of two laws (float64)."""
    ja = _joint(Law(a.stop.double(), a.correction.double()))
    jb = _joint(Law(b.stop.double(), b.correction.double()))
    return 0.5 * (ja - jb).abs().sum(-1)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Normwise relative error max |x - ref| / max |ref| (inf when x has NaN/inf entries)."""
    ref = ref.double()
    err = (x.double() - ref).abs()
    if not bool(torch.isfinite(err).all()):
        return math.inf
    return float(err.max() / ref.abs().max().clamp(min=torch.finfo(torch.float64).tiny))


def _steps(name: str, drafts, q, p):
    """Intermediate quantities of a built-in verifier, on inputs of one dtype."""
    from ..verifiers.block import block_weights
    from ..verifiers.common import drafted_probs, residuals
    from ..verifiers.gbv import _gather_path, _skewed_path_rows, drafted_rank, select_path

    if name in ("token", "block"):
        d, q1, p1 = drafts[:, 0], q[:, 0], p[:, 0]
        px, qx = drafted_probs(d, q1, p1)
        out = {"ratio p/q": torch.where(qx > 0, px / torch.where(qx > 0, qx, 1), 1)}
        if name == "block":
            L = d.shape[-1]
            w = block_weights(d, q1, p1)
            S = residuals(w[:, :L], q1, p1).sum(-1)
            den = S + (1 - w[:, :L])
            out.update({"weights w": w, "residual mass S": S,
                        "acceptance h": torch.where(den > 0, S / torch.where(den > 0, den, 1),
                                                    1)})
        return out
    if name == "gbv":  # the verifier's own recursion, asked for its denominators
        K = drafts.shape[1]
        k = select_path(drafts, drafted_rank(drafts, q, p), q.shape[-1])
        d, qs, ps = (_gather_path(a, k) for a in (drafts, q, p))
        dens = torch.empty(tuple(d.shape), dtype=qs.dtype, device=qs.device)
        rows = _skewed_path_rows(d, qs, ps, K, "low", denominators=dens)
        return {"skewed rows q^G": rows, "skew denominator": dens}
    return {}


@dataclass
class DtypeAudit:
    dtype: str
    stop_error: float
    output_tv: float
    input_rounding_tv: float
    nan: int
    inf: int
    negative: int
    stop_sum_error: float
    steps: dict = field(default_factory=dict)
    worst_step: str | None = None
    skew_fallbacks: int = 0

    def flags(self) -> list[str]:
        out = []
        if self.nan or self.inf:
            out.append(f"{self.nan} NaN / {self.inf} inf entries")
        if self.negative:
            out.append(f"{self.negative} negative probabilities")
        if self.skew_fallbacks:
            out.append(f"skewed law underflowed to the q fallback at {self.skew_fallbacks} "
                       f"node(s)")
        return out


def _largest_factor(batch: int, paths: int, length: int, vocab_size: int) -> str:
    """The size furthest above its default (B = 4, K = 1, L = 8, V = 151,936), named for the
    advice of an audit's refusal (the advice was always a smaller batch, also for V = 10^12)."""
    ratios = {"batch (--batch)": Fraction(batch, 4), "number of paths (--paths)": Fraction(paths),
              "block length (--block)": Fraction(length + 1, 9),
              "vocabulary (--vocab)": Fraction(vocab_size, 151_936)}  # exact: any size
    return max(ratios, key=ratios.get)


def audit_bytes(batch: int, paths: int, length: int, vocab_size: int) -> int:
    """Memory of one audit: about twelve float64 arrays of the rows' size B K (L+1) V."""
    return 12 * 8 * _entries(batch, paths, length, vocab_size)


def _entries(batch: int, paths: int, length: int, vocab_size: int) -> int:
    """Entries of one table of the audited rows: B K (L+1) V."""
    return batch * paths * (length + 1) * vocab_size


def audit(verifier="block", kind: str = "peaked", vocab_size: int = 151_936, batch: int = 4,
          paths: int = 1, length: int = 8, dtypes=("bfloat16", "float16", "float32"),
          seed: int = 0, rows=None) -> list[DtypeAudit]:
    """Audit ``verifier`` on rows of ``kind`` in each dtype (module doc); ``rows`` = (drafts
    [B, K, L], q [B, K, L, V], p [B, K, L+1, V]) float64 replaces the synthetic rows."""
    spec = get_verifier(verifier, multi_path=paths > 1)
    if spec.single_path and paths != 1:
        raise SpectheoryError(f"verifier {spec.name!r} is single-path: use paths = 1")
    for name, value in (("vocab_size", vocab_size), ("batch", batch), ("paths", paths),
                        ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpectheoryError(f"{name} = {value!r} must be a positive integer")
    if vocab_size < 2:
        raise SpectheoryError("vocab_size must be at least 2")
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise SpectheoryError(f"unknown dtype {unknown[0]!r}; choose from {', '.join(DTYPES)}")
    need = audit_bytes(batch, paths, length, vocab_size)
    if need > MAX_AUDIT_BYTES:
        sizes = ", ".join(f"{k} = {limits.human_count(v)}" for k, v in
                          (("B", batch), ("K", paths), ("L", length), ("V", vocab_size)))
        raise SpectheoryError(f"an audit of {sizes} needs about {limits.human_bytes(need)}, over "
                              f"the {MAX_AUDIT_BYTES / 2**30:.0f} GiB limit; use a smaller "
                              f"{_largest_factor(batch, paths, length, vocab_size)}")
    if rows is None:
        drafts, q, p = audit_rows(kind, vocab_size, batch, paths, length, seed)
    else:
        if not isinstance(rows, (tuple, list)) or len(rows) != 3:
            raise SpectheoryError(f"rows = {limits.shown(rows)} must be (drafts, q, p)")
        try:
            drafts, q, p = (r if is_tensor(r) else torch.as_tensor(r) for r in rows)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise SpectheoryError(f"rows: not tensors of numbers ({type(exc).__name__}: "
                                  f"{limits.shown(str(exc), 80)})") from None
        drafts, q, p = check_rows(drafts, q, p)
    exact_law = spec.law(drafts, q, p)
    out = []
    for name in dtypes:
        dt = getattr(torch, name)
        qd, pd = q.to(dt), p.to(dt)
        law = spec.law(drafts, qd, pd)
        ref = spec.law(drafts, qd.double(), pd.double())
        stop = law.stop.double()
        allv = torch.cat([stop.reshape(-1), law.correction.double().reshape(-1)])
        steps_d = _steps(spec.name, drafts, qd, pd)
        steps_r = _steps(spec.name, drafts, qd.double(), pd.double())
        errs = {k: _rel(steps_d[k], steps_r[k]) for k in steps_d
                if k != "skew denominator"}
        fallbacks = 0
        if "skew denominator" in steps_d:
            fallbacks = int(((steps_d["skew denominator"] == 0)
                             & (steps_r["skew denominator"] > 0)).sum())
        finite = torch.isfinite(allv)
        out.append(DtypeAudit(
            dtype=name,
            stop_error=float((stop - ref.stop.double()).abs().nan_to_num(math.inf).max()),
            output_tv=float(output_tv(law, ref).nan_to_num(math.inf).max()),
            input_rounding_tv=float(output_tv(law, exact_law).nan_to_num(math.inf).max()),
            nan=int(torch.isnan(allv).sum()), inf=int(torch.isinf(allv).sum()),
            negative=int((allv[finite] < 0).sum()),
            stop_sum_error=float((stop.sum((-2, -1)) - 1).abs().nan_to_num(math.inf).max()),
            steps=errs, worst_step=max(errs, key=errs.get) if errs else None,
            skew_fallbacks=fallbacks))
    return out


def log1p_check(kind: str = "tiny-q", vocab_size: int = 151_936, batch: int = 4,
                length: int = 8, seed: int = 0) -> dict:
    """TV of the float32 log-space block correction with log1p(-r) and with log(1 - r),
    r = q / (w p), against the exact residual normalise(max(w p - q, 0)) (float64), max over rows
    and positions whose residual has positive mass. In float32, 1 - r rounds to 1 once
    r < 2^-24, so the two forms differ by about r there: the measured difference says how much
    that matters on the rows at hand."""
    from ..verifiers.block import block_weights

    drafts, q, p = audit_rows(kind, vocab_size, batch, 1, length, seed)
    d, q1, p1 = drafts[:, 0], q[:, 0], p[:, 0]
    L = length
    w = block_weights(d, q1, p1)[:, :L].unsqueeze(-1)
    exact = (w * p1[:, :L] - q1).clamp(min=0)
    exact = exact / exact.sum(-1, keepdim=True).clamp(min=1e-300)
    mass = (w * p1[:, :L] - q1).clamp(min=0).sum(-1)
    live = mass > 0  # positions whose rejection has positive probability
    wp = (w * p1[:, :L]).float()
    r = q1.float() / wp
    res = {}
    for label, fn in (("log1p", lambda x: torch.log1p(-x)), ("log", lambda x: torch.log(1 - x))):
        with torch.no_grad():
            logits = torch.where(r < 1, torch.log(wp) + fn(r.clamp(max=1)),
                                 torch.full_like(wp, -math.inf))
            approx = torch.softmax(logits.double(), dim=-1)
        tv = 0.5 * (approx - exact).abs().sum(-1)
        res[label] = float(tv[live].nan_to_num(1.0).max()) if bool(live.any()) else 0.0
    return res


def prefix_noise_check(verifier="gbv", paths: int = 3, vocab_size: int = 151_936,
                       batch: int = 4, length: int = 8, noise: float = 4e-7, seed: int = 0,
                       kind: str = "peaked", rows=None) -> dict:
    """How far float noise between the rows of one prefix moves a verifier's law.

    A batched forward computes a prefix shared by several paths once per path, and the copies differ
    in the last bits (relative noise of about 4e-7 in float32). The verifiers assume one row per
    node. Here every path of a batch row shares the first ``length - 1`` tokens of path 0 and
    differs only in its last token, each path's copy of a shared row gets independent relative noise
    of size ``noise`` (renormalised), and the law of the emitted block on the noisy rows is compared
    with the one on the shared rows ([`block_tv`][spectheory.cli.audit.block_tv]: paths that emit the
    same block are merged). Returns the largest such TV over batch rows and the largest change of
    the probability of following each path (a change of selection between two paths that drafted the
    same tokens moves this by up to 1 without moving the output). ``rows`` = (drafts [B, K, L], q,
    p) recorded with one row per prefix replaces the synthetic rows (then every row gets its own
    noise)."""
    spec = get_verifier(verifier, multi_path=paths > 1)
    g = torch.Generator().manual_seed(seed + 1)
    if rows is not None:
        d, qs, ps = rows
        paths = d.shape[1]
    else:
        drafts, q, p = audit_rows(kind, vocab_size, batch, 1, length, seed)
        d = drafts.expand(batch, paths, length).clone()
        for k in range(1, paths):  # the last token differs between paths
            d[:, k, -1] = torch.multinomial(q[:, 0, -1], 1, generator=g)[:, 0]
        qs = q.expand(batch, paths, length, vocab_size)
        ps = p.expand(batch, paths, length + 1, vocab_size)
    clean = spec.law(d, qs, ps)

    def jitter(x):
        y = x * (1 + noise * (2 * torch.rand(x.shape, generator=g, dtype=x.dtype) - 1))
        return y / y.sum(-1, keepdim=True)

    noisy = spec.law(d, jitter(qs.clone()), jitter(ps.clone()))
    follow = (noisy.stop.sum(-1) - clean.stop.sum(-1)).abs()
    return {"verifier": spec.name, "paths": paths, "noise": noise,
            "output_tv": float(block_tv(d, noisy, clean).max()),
            "path_probability_change": float(follow.max())}


def block_law(drafts: torch.Tensor, law: Law) -> list[dict]:
    """Per batch row, the law of the emitted block: {X_k^tau: P(X_k^tau, Y = .)} [V], paths
    that emit the same prefix merged (their path index does not matter for the output)."""
    stop, corr = law.stop.double(), law.correction.double()
    B, K, L1 = stop.shape
    out = []
    for b in range(B):
        rows: dict = {}
        for k in range(K):
            for i in range(L1):
                key = tuple(drafts[b, k, :i].tolist())
                part = stop[b, k, i] * corr[b, k, i]
                rows[key] = rows[key] + part if key in rows else part
        out.append(rows)
    return out


def block_tv(drafts: torch.Tensor, a: Law, b: Law) -> torch.Tensor:
    """Per batch row, the TV between the laws of the emitted blocks of two laws on the same
    drafts ([`block_law`][spectheory.cli.audit.block_law])."""
    tvs = []
    for ra, rb in zip(block_law(drafts, a), block_law(drafts, b)):
        keys = set(ra) | set(rb)
        zero = next(iter(ra.values())) * 0
        tvs.append(0.5 * sum(float((ra.get(k, zero) - rb.get(k, zero)).abs().sum())
                             for k in keys))
    return torch.tensor(tvs, dtype=torch.float64)


def load_rows(path) -> tuple:
    """Recorded rows (``spectheory validate record-rows``): a ``torch.save`` file holding
    ``drafts`` [B, K, L], ``q`` [B, K, L, V] and ``p`` [B, K, L+1, V]. Returns (drafts, q, p,
    description); every problem is one [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError]."""
    import os

    if os.path.isdir(path):
        raise SpectheoryError(f"--rows-file {path}: is a folder, not a file")
    if not os.path.exists(path):
        raise SpectheoryError(f"--rows-file {path}: no such file")
    if not os.path.isfile(path):  # a device, a pipe or a socket: torch.load would misread it
        raise SpectheoryError(f"--rows-file {path}: not a regular file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a file torch cannot read: one line, never a traceback
        first = (str(exc).splitlines() or [""])[0]  # an empty file's message is empty
        if "Weights only load failed" in first:  # torch's advice on weights_only, cut mid-word
            first = ("not a file torch.save wrote, or one holding objects other than tensors, "
                     "dicts and lists")
        elif len(first) > 120:
            first = first[:120].rsplit(" ", 1)[0] + " ..."
        raise SpectheoryError(f"--rows-file {path}: not a torch file of rows "
                              f"({type(exc).__name__}{': ' + first if first else ''})") from None
    if not isinstance(obj, dict) or not {"drafts", "q", "p"} <= set(obj):
        raise SpectheoryError(f"--rows-file {path}: expected a dict with drafts, q and p")
    drafts, q, p = check_rows(obj["drafts"], obj["q"], obj["p"], f"--rows-file {path}")
    return drafts, q, p, limits.shown(str(obj.get("models", path)), 200)


def check_rows(drafts, q, p, where: str = "rows"):
    """Rows to audit: ``drafts`` [B, K, L] integer ids in 0..V-1, ``q`` [B, K, L, V] and ``p``
    [B, K, L+1, V] dense real tensors on a device with data (not ``meta``), laws (finite,
    non-negative, summing to 1 within 1e-6), within `MAX_AUDIT_BYTES`. Returns (drafts int64,
    q float64, p float64); every problem is one
    [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError] starting with ``where``."""
    for name, t in (("drafts", drafts), ("q", q), ("p", p)):
        if is_tensor(t) and (t.layout != torch.strided or t.is_complex()):
            what = "complex" if t.is_complex() else f"of layout {t.layout}"
            raise SpectheoryError(f"{where}: {name} is {what}; rows are dense real "
                                  "tensors")
        if is_tensor(t) and t.is_meta:
            raise SpectheoryError(f"{where}: {name} is on the meta device (a tensor without "
                                  "data); rows are tensors with values")
    if not all(is_tensor(t) for t in (drafts, q, p)) or drafts.dim() != 3 or q.dim() != 4 \
            or p.dim() != 4 or q.shape[:3] != drafts.shape or p.shape[:2] != drafts.shape[:2] or \
            p.shape[2] != drafts.shape[2] + 1 or q.shape[-1] != p.shape[-1]:
        raise SpectheoryError(f"{where}: shapes must be drafts [B, K, L], "
                              f"q [B, K, L, V], p [B, K, L+1, V]")
    if 0 in tuple(q.shape):
        raise SpectheoryError(f"{where}: no rows to audit (drafts of shape "
                              f"{list(drafts.shape)}, V = {q.shape[-1]})")
    if drafts.is_floating_point() or drafts.is_complex() or drafts.dtype == torch.bool:
        raise SpectheoryError(f"{where}: drafts are {drafts.dtype}; drafted tokens are "
                              "integer ids")
    if int(drafts.min()) < 0 or int(drafts.max()) >= q.shape[-1]:
        raise SpectheoryError(f"{where}: a drafted token lies outside "
                              f"0..{q.shape[-1] - 1}")
    B, K, L = drafts.shape
    need = audit_bytes(B, K, L, q.shape[-1])  # an 8 KB file of expanded (stride-0) tensors
    if need > MAX_AUDIT_BYTES:                # held [100, 1, 8, 10^6]: 6.4 GB once copied
        raise SpectheoryError(f"{where}: rows of B = {B}, K = {K}, L = {L}, "
                              f"V = {q.shape[-1]:,} need about {need / 2**30:.1f} GiB to audit, "
                              f"over the {MAX_AUDIT_BYTES / 2**30:.0f} GiB limit")
    q, p = q.double(), p.double()
    for name, t in (("q", q), ("p", p)):
        if not bool(torch.isfinite(t).all()) or bool((t < 0).any()) or \
                float((t.sum(-1) - 1).abs().max()) > 1e-6:
            raise SpectheoryError(f"{where}: the {name} rows are not distributions")
    return drafts.long(), q, p


def audit_text(results: list[DtypeAudit], header: str) -> str:
    lines = [header, f"  {'dtype':9s} {'stop error':>11s} {'output TV':>11s} "
                     f"{'+ input rounding':>17s} {'worst step':28s} flags"]
    for r in results:
        worst = (f"{r.worst_step} ({r.steps[r.worst_step]:.1e})" if r.worst_step else "-")
        lines.append(f"  {r.dtype:9s} {r.stop_error:11.2e} {r.output_tv:11.2e} "
                     f"{r.input_rounding_tv:17.2e} {worst:28s} "
                     f"{'; '.join(r.flags()) or 'none'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line


def cmd_audit(args) -> int:
    import json
    import sys
    from dataclasses import asdict

    _generator_options(args)
    kinds = args.rows.split(",")
    dtypes = args.dtypes.split(",")
    for option, names in (("--dtypes", dtypes), ("--rows", kinds)):  # twice: the same audit
        for name in sorted({d for d in names if names.count(d) > 1}):  # run again
            raise SpectheoryError(f"{option} names {name!r} twice")
    for kind in kinds:
        if kind not in ROW_KINDS:
            raise SpectheoryError(f"--rows: unknown row kind {kind!r}; choose from "
                                  f"{', '.join(ROW_KINDS)}")
    if args.rows_file is not None and not args.rows_file.strip():  # not "no file": a typo
        raise SpectheoryError(f"--rows-file {args.rows_file!r} names no file")
    results, texts = {}, []
    _note_estimate(len(kinds) if not args.rows_file else 0, len(dtypes), args)
    if args.rows_file:
        drafts, q, p, what = load_rows(args.rows_file)
        B, K, L = drafts.shape
        for name, have in (("vocab", q.shape[-1]), ("batch", B), ("paths", K), ("block", L)):
            given = args.given_sizes.get(name)
            if given is not None and given != have:
                raise SpectheoryError(f"--{name} {given} contradicts --rows-file, whose rows have "
                                      f"{name} {have}; leave --{name} out")
        res = audit(args.verifier, "recorded", q.shape[-1], B, K, L, dtypes, rows=(drafts, q, p))
        results["recorded"] = [asdict(r) for r in res]
        texts.append(audit_text(res, f"{args.verifier}, recorded rows of {what}, "
                                     f"V = {q.shape[-1]:,}, B = {B}, K = {K}, L = {L}:"))
        kinds = []
    for kind in kinds:
        res = audit(args.verifier, kind, args.vocab, args.batch, args.paths, args.block,
                    dtypes, args.seed)
        results[kind] = [asdict(r) for r in res]
        texts.append(audit_text(res, f"{args.verifier}, {kind} rows, V = {args.vocab:,}, "
                                     f"B = {args.batch}, K = {args.paths}, L = {args.block}:"))
    logs = {kind: log1p_check(kind, args.vocab, args.batch, args.block, args.seed)
            for kind in kinds} if args.log1p else {}
    for kind, v in logs.items():
        texts.append(f"log-space correction, {kind} rows, float32: TV {v['log1p']:.2e} with "
                     f"log1p(-r), {v['log']:.2e} with log(1 - r)")
    noise = {}
    if args.prefix_noise:
        recorded = load_rows(args.rows_file)[:3] if args.rows_file else None
        for name in ("gbv", "specinfer", "traversal-iid", "spectr"):
            if recorded is not None and recorded[0].shape[1] < 2:
                break
            noise[name] = prefix_noise_check(name, max(args.paths, 2), args.vocab, args.batch,
                                             args.block, seed=args.seed, rows=recorded)
            texts.append(f"prefix-row noise 4e-7, {name} K = {noise[name]['paths']}: output TV "
                         f"{noise[name]['output_tv']:.2e}, largest change of a path's "
                         f"probability {noise[name]['path_probability_change']:.2e}")
    if args.json:
        result_stream().write(json.dumps({"audit": results, "log1p": logs, "prefix_noise": noise})
                         + "\n")
    else:
        sys.stdout.write("\n".join(texts) + "\n")
    return 0


#: The synthetic rows' options and their defaults (None on the parser, so that one given with
#: ``--rows-file``, whose rows fix them, is refused instead of ignored).
GENERATOR_DEFAULTS = {"rows": "flat,peaked,tiny-q", "vocab": 151_936, "batch": 4, "paths": 1,
                      "block": 8, "seed": 0}


def _generator_options(args) -> None:
    """Refuse the synthetic rows' options that do nothing with ``--rows-file`` (``--rows``,
    ``--log1p``, and ``--seed`` but with ``--prefix-noise``, whose noise it seeds); the sizes are
    checked against the file's (`_check_sizes`). Then fill in the defaults."""
    if args.rows_file:
        given = [name for name in ("rows", "seed") if getattr(args, name) is not None
                 and not (name == "seed" and args.prefix_noise)]
        given += ["log1p"] if args.log1p else []
        if given:
            raise SpectheoryError(f"--{given[0]} does nothing with --rows-file (the audit reads "
                                  "the recorded rows); leave it out")
        args.given_sizes = {name: getattr(args, name) for name in ("vocab", "batch", "paths",
                                                                  "block")
                            if getattr(args, name) is not None}
    for name, value in GENERATOR_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


#: Row entries an audit works through per second per dtype (measured on a 2-core machine:
#: `audit --block 20`, 115 million entries in about 8 s); for the estimate of a long audit.
AUDIT_ENTRIES_PER_SECOND = 1e7


def _note_estimate(kinds: int, dtypes: int, args) -> None:
    """A note before an audit estimated to run past `spectheory.runtime.limits.NOTE_SECONDS`
    (``--block 100`` ran 50 s without a word)."""
    size = (args.batch, args.paths, args.block, args.vocab)
    if audit_bytes(*size) > MAX_AUDIT_BYTES:
        return  # refused by the memory check, in one line: no note before it
    per_table = _entries(*size)
    seconds = kinds * dtypes * per_table / AUDIT_ENTRIES_PER_SECOND
    if seconds > limits.NOTE_SECONDS:
        limits.note(f"audit: {kinds} row kinds x {dtypes} dtypes of B K (L+1) V = "
                    f"{per_table:,} entries, estimated {limits.human_seconds(seconds)}; "
                    "--time-limit bounds it")


def register(sub) -> None:
    from .commands import add_time_limit_option, int_in, positive_int, seed_type

    p = sub.add_parser("audit", help="a verifier's law in bfloat16/float16/float32 vs float64 "
                                     "on real-vocabulary-sized rows")
    p.add_argument("--verifier", default="block",
                   help="a name from `spectheory verifiers` or module:function")
    p.add_argument("--rows", default=None,
                   help=f"comma-separated row kinds ({', '.join(ROW_KINDS)}; default "
                        "flat,peaked,tiny-q)")
    p.add_argument("--dtypes", default="bfloat16,float16,float32",
                   help=f"comma-separated dtypes ({', '.join(DTYPES)})")
    p.add_argument("--vocab", type=int_in(2, limits.MAX_LIMIT), default=None,
                   help="vocabulary size V (default 151,936)")
    p.add_argument("--batch", type=positive_int, default=None, help="draft rows B (default 4)")
    p.add_argument("--paths", type=positive_int, default=None,
                   help="paths K (multi-path verifiers; default 1)")
    p.add_argument("--block", type=positive_int, default=None, help="block length L (default 8)")
    add_time_limit_option(p)
    p.add_argument("--seed", type=seed_type, default=None,
                   help="seed of the synthetic rows (0..2^63-1; default 0)")
    p.add_argument("--rows-file", default=None, metavar="FILE",
                   help="audit recorded real conditionals (spectheory validate record-rows) "
                        "instead of synthetic rows")
    p.add_argument("--log1p", action="store_true",
                   help="also measure the log-space correction with log1p vs log(1 - r)")
    p.add_argument("--prefix-noise", action="store_true",
                   help="also measure how far 4e-7 noise between copies of a shared prefix's "
                        "row moves the multi-path verifiers' laws")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(json_result=True)  # the result through result_stream (json_stdout)
    p.set_defaults(func=cmd_audit)


__all__ = ["DTYPES", "DtypeAudit", "ROW_KINDS", "audit", "audit_rows", "audit_text",
           "block_law", "block_tv", "load_rows", "log1p_check", "output_tv",
           "prefix_noise_check"]
