"""``mode="coins"`` and ``mode="coins-tau"`` of the sampler check: decisions compared one by one
with spectheory's coin-driven reference on the same uniforms.

[`reference_coin_sampler`][spectheory.testing.checks.coins_mode.reference_coin_sampler] is the
reference (conventions `CONVENTIONS`: the token rule of Leviathan et al. 2023 and the block rule of
Sun et al. 2024); `_coins_mode` draws the coins (pinned rows at the ends of their ranges included),
maps them onto a sampler's declared engine convention
([`CoinConvention`][spectheory.testing.engines.layouts.CoinConvention]) and reports the first
differing decision as a [`CoinMismatch`][spectheory.testing.checks.report.CoinMismatch].
"""

from __future__ import annotations

from typing import Callable

from ...runtime._lazy import torch

from ...runtime.errors import SpectheoryError, UserCodeError
from ...inputs.instances import Instance
from ...sampling import inverse_cdf
from ...verifiers.block import block_weights
from ...verifiers.common import drafted_probs, residual_corrections, residuals
from .calls import MAX_CALL_FLOATS, _failed, _outputs, _pace_add, _split, _tokens
from .report import (CoinMismatch, DraftRows, InstanceMismatches, SamplerReport, _name_of,
                     declared, wrapped_chain)
from .rows import _fixed_rows

#: Coin conventions of
#: [`reference_coin_sampler`][spectheory.testing.checks.sampler.reference_coin_sampler] (see its
#: docstring).
CONVENTIONS = ("token", "block")
#: Smallest positive position coin used in the pinned rows of ``mode="coins"``.
TINY_COIN = 2.0**-53


def _coin_thresholds(convention: str, drafts, q, p):
    """Per-position thresholds [B, L] (accept position i when u_i <= t_i) and correction rows
    [B, L+1, V] of a convention."""
    L = drafts.shape[-1]
    if convention == "token":
        px, qx = drafted_probs(drafts, q, p)
        ratio = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)),
                            torch.ones_like(px))
        thr = torch.clamp(ratio, max=1.0)
        corr = residual_corrections(residuals(torch.ones_like(thr), q, p), p)
        return thr, corr
    w = block_weights(drafts, q, p)
    res = residuals(w[:, :L], q, p)
    S = res.sum(-1)
    den = S + (1 - w[:, :L])
    h_mid = torch.where(den > 0, S / torch.where(den > 0, den, torch.ones_like(den)),
                        torch.ones_like(S))
    thr = torch.cat([h_mid[:, 1:], w[:, L:]], dim=1)  # h_1..h_L
    corr = residual_corrections(res, p, S.unsqueeze(-1))
    return thr, corr


def _coin_decide(convention: str, drafts, q, p, uniforms, tol: float = 0.0, token: bool = True):
    """Reference decisions (tau, Y) and a mask of rows whose decision is ambiguous (a uniform
    within ``tol`` of its threshold; a threshold of exactly 0 is never ambiguous, nor one of
    exactly 1 unless the token rule's unclamped ratio p/q, 1 included, lies within ``tol`` of
    u). With
    ``token=False`` only the positions' decisions count (the token coin's ties are ignored)."""
    if convention not in CONVENTIONS:
        raise SpectheoryError(f"unknown coin convention {convention!r}; choose from "
                              f"{', '.join(CONVENTIONS)}")
    Bsz, L = drafts.shape
    u = uniforms.to(torch.float64)
    thr, corr = _coin_thresholds(convention, drafts, q.to(torch.float64), p.to(torch.float64))
    ok = u[:, :L] <= thr
    # thresholds of exactly 0 (p(X_i) = 0) or 1 (p >= q) are exact in any float arithmetic
    near = ((u[:, :L] - thr).abs() <= tol) & (thr != 0) & (thr != 1)
    if convention == "token":  # p/q at or just above 1 may round to just below 1 in an engine
        # that recomputes p and q (a float32 softmax of each side's logits): p(X) = q(X) exactly
        # in the kit's rows is no longer exactly 1 there
        px, qx = drafted_probs(drafts, q.to(torch.float64), p.to(torch.float64))
        raw = px / torch.where(qx > 0, qx, torch.ones_like(qx))
        near |= (thr == 1) & (qx > 0) & ((u[:, :L] - raw).abs() <= tol)
    pos = torch.arange(1, L + 1, device=drafts.device)
    if convention == "token":
        tau = torch.cumprod(ok.to(torch.long), dim=1).sum(dim=1)
        relevant = pos.unsqueeze(0) <= (tau + 1).unsqueeze(1)
    else:
        tau = torch.where(ok, pos.unsqueeze(0), torch.zeros_like(pos).unsqueeze(0)).max(1).values
        relevant = torch.ones_like(ok)
    ambiguous = (near & relevant).any(dim=1)
    rows = corr[torch.arange(Bsz, device=drafts.device), tau]
    y = inverse_cdf(rows, u[:, L])
    cdf = torch.cumsum(rows, dim=-1)
    t = u[:, L] * cdf[:, -1]
    hi = cdf.gather(1, y.unsqueeze(1)).squeeze(1)
    lo = torch.where(y > 0, cdf.gather(1, (y - 1).clamp(min=0).unsqueeze(1)).squeeze(1),
                     torch.zeros_like(t))
    # only interior boundaries are ties: below the first and above the last token of positive
    # mass lie tokens of probability zero, which no correct sampler returns
    near_lo = (t - lo <= tol * cdf[:, -1]) & (lo > 0)
    near_hi = (hi - t <= tol * cdf[:, -1]) & (hi < cdf[:, -1])
    ambiguous |= (near_lo | near_hi) & (tol > 0) & token
    return tau, y, ambiguous


def _coin_support(convention: str, drafts, q, p, tau, y, tol: float):
    """Rows whose token ``y`` has probability 0 in the reference's correction row at ``tau``
    (coins-tau mode): p(y|X^tau) = 0, or the residual w_tau p(y) - q(y) below -tol times the
    row's largest target probability while the residual has mass (w = 1 for the token rule;
    at tau = L, or a residual of mass 0, the row is p(.|X^tau))."""
    Bsz, L = drafts.shape
    q, p = q.to(torch.float64), p.to(torch.float64)
    b = torch.arange(Bsz, device=drafts.device)
    tau = tau.clamp(0, L)
    y = y.clamp(0, q.shape[-1] - 1)
    w = (torch.ones(Bsz, L + 1, dtype=torch.float64, device=drafts.device)
         if convention == "token" else block_weights(drafts, q, p))
    tq = tau.clamp(max=max(L - 1, 0))
    wt = w[b, tau].unsqueeze(-1)
    row = wt * p[b, tau] - q[b, tq]
    has_mass = (row.clamp(min=0).sum(-1) > 0) & (tau < L)
    pre = row[b, y]
    scale = p[b, tau].max(-1).values
    return (p[b, tau, y] == 0) | (has_mass & (pre < -tol * scale))


def reference_coin_sampler(convention: str = "block") -> Callable:
    """spectheory's coin-driven reference ``f(drafts [B, L], q, p, uniforms [B, L+1]) ->
    (accepted, token)``.

    Conventions (``uniforms[:, i-1]`` is position i's coin, in (0, 1]; ``uniforms[:, L]`` the
    token's coin, in [0, 1)):

    * ``"token"`` (Leviathan et al., ICML 2023): accept X_i while
      u_i <= min(1, p(X_i|X^{i-1}) / q(X_i|X^{i-1})) (ratio 1 where q(X_i) = 0); tau is the
      number of positions accepted before the first rejection; correction row
      normalise(max(p(.|X^tau) - q(.|X^tau), 0));
    * ``"block"`` (Sun et al., arXiv 2403.10444): w_i = min(1, w_{i-1} p/q), S_i = sum_x
      max(w_i p(x|X^i) - q(x|X^i), 0), h_i = S_i / (S_i + 1 - w_i) (1 where the denominator is
      0), h_L = w_L; tau = the last i in 1..L with u_i <= h_i (0 if none); correction row
      normalise(max(w_tau p(.|X^tau) - q(.|X^tau), 0));

    then Y = [`inverse_cdf`][spectheory.sampling.inverse_cdf] of the correction row (p(.|X^L) at
    tau = L) at u_{L+1}: the first index whose cumulative sum exceeds u_{L+1} times the row's
    total. With coins uniform on their ranges, the law of (tau, Y) is exactly the verifier's law.
    """
    if convention not in CONVENTIONS:
        raise SpectheoryError(f"unknown coin convention {convention!r}; choose from "
                              f"{', '.join(CONVENTIONS)}")

    def coin_sampler(drafts, q, p, uniforms):
        tau, y, _ = _coin_decide(convention, drafts, q, p, uniforms)
        return tau, y

    coin_sampler.__name__ = f"reference_{convention}_coin_sampler"
    return coin_sampler


def _round_rows(x: torch.Tensor, V: int):
    if V > 16:
        return f"[{list(x.shape)} rows, V = {V}]"
    return [[round(float(v), 6) for v in row] for row in x]


def _coin_blocks(instances, per):
    """``(instance index, instance, rows, first)`` in blocks of at most `MAX_CALL_FLOATS` input
    floats (at least 32 rows), so that the rows of coins drawn at once do not grow with
    ``samples``; ``first`` marks an instance's first block (its pinned rows)."""
    for inst_i, (inst, n) in enumerate(zip(instances, per)):
        if isinstance(inst, Instance):
            L, V = inst.block_length, inst.vocab_size
        else:
            d, q = inst[0], inst[1]
            L, V = int(d.shape[-1]), int(q.shape[-1])
        block = max(32, MAX_CALL_FLOATS // ((2 * L + 1) * V))  # the calls' chunk
        for s in range(0, n, block):
            yield inst_i, inst, min(block, n - s), s == 0


def _coins_mode(sampler, convention, instances, samples, alpha, seed, tol, max_batch,
                proc=None, mode="coins"):
    conv = _engine_convention(sampler, mode)
    name = convention if conv is None else f"{convention}, engine coins {conv.name}"
    g = torch.Generator().manual_seed(seed)
    per = _split(samples, len(instances))
    checked = ambiguous = 0
    found: dict = {}  # instance -> [differing rows, rows compared, first CoinMismatch]
    raised = ""  # the sampler raised after decisions had differed (reported with them)
    start = 0  # the block's first row within its instance
    for inst_i, inst, n, first in _coin_blocks(instances, per):
        start = 0 if first else start
        rows = _fixed_rows(inst, 1, "iid", n, g)
        if not isinstance(inst, Instance):  # given rows, cycled to n rows of fresh coins
            rows = DraftRows(*(x[torch.arange(n) % x.shape[0]] for x in rows))
        d, q, p = (x[:, 0] for x in rows)
        Bn, L = d.shape
        V = q.shape[-1]
        u = torch.empty(Bn, L + 1, dtype=torch.float64)
        u[:, :L] = 1.0 - torch.rand(Bn, L, generator=g, dtype=torch.float64)  # (0, 1]
        u[:, L] = torch.rand(Bn, generator=g, dtype=torch.float64)  # [0, 1)
        # pinned rows: the ends of the coins' ranges
        pins = [(1.0, 0.0), (TINY_COIN, 1.0 - 2.0**-53), (1.0, 1.0 - 2.0**-53),
                (TINY_COIN, 0.0)]
        for r, (pos, tok) in enumerate(pins[: max(0, Bn // 8) if first else 0]):
            u[r, :L] = pos
            u[r, L] = tok
        ue = u  # the coins the sampler is handed: on its engine's grid when it declares one
        if conv is not None:
            ue = u.clone()
            ue[:, :L] = conv.from_kit(u[:, :L]).to(torch.float64)
            if conv.token_coin:
                ue[:, L] = conv.token_from_kit(u[:, L]).to(torch.float64)
        chunk = max(1, MAX_CALL_FLOATS // ((2 * L + 1) * V)) if max_batch is None else max_batch
        for s in range(0, Bn, chunk):
            sl = slice(s, min(Bn, s + chunk))
            args = (d[sl].clone(), q[sl].clone(), p[sl].clone(), ue[sl].clone())
            try:
                out = sampler(*args) if checked else _first_call(sampler, args, mode)
            except UserCodeError as exc:
                if not any(e[2] is not None for e in found.values()):
                    raise
                # decisions already differ: the verdict stands, the raise is reported with it
                raised = f"then, on instance {inst_i}, {exc}"
                break
            res, note = _outputs(out, 1, sl.stop - sl.start, L, V)
            if note:
                return _failed(mode, samples, alpha, name, note, checked)
            _pace_add(sl.stop - sl.start)
            _, tau, y = res
            pt = p[sl] if proc is None else proc(p[sl], d[sl])
            rt, ry, amb = _coin_decide(convention, d[sl], q[sl], pt, u[sl], tol,
                                       token=mode == "coins")
            tau_bad = tau != rt
            if mode == "coins":
                y_bad = y != ry
            else:  # coins-tau: Y only has to be possible
                y_bad = ~tau_bad & _coin_support(convention, d[sl], q[sl], pt, tau, y, tol)
            bad = (tau_bad | y_bad) & ~amb
            ambiguous += int(amb.sum())
            entry = found.setdefault(inst_i, [0, 0, None])
            entry[1] += sl.stop - sl.start
            if bad.any():
                entry[0] += int(bad.sum())
                if entry[2] is None:
                    i = int(bad.nonzero()[0])
                    b = s + i
                    entry[2] = _coin_mismatch(convention, conv, mode, start + b, d[b], q[b],
                                              pt[i], u[b], ue[b], (int(rt[i]), int(ry[i])),
                                              (int(tau[i]), int(y[i])), bool(tau_bad[i]),
                                              bool(y_bad[i]), V)
            checked += sl.stop - sl.start
        if raised:
            break
        start += Bn
    failing = [InstanceMismatches(i, c, r, mm) for i, (c, r, mm) in sorted(found.items())
               if mm is not None]
    if failing:
        mm = failing[0].first
        rep = SamplerReport(False, 0.0, mode, checked, alpha, None, float("nan"), name,
                            rows=checked, mismatch=mm, ambiguous=ambiguous,
                            instance_mismatches=failing)
        for im in failing[:1]:  # the one shown in full; the others are listed with counts
            m = im.first
            rep.notes.append(f"instance {im.instance}: the sampler's "
                             f"{'accepted count' if m.differs == 'tau' else 'decision'} "
                             f"differs from the reference on the same uniforms"
                             if m.differs != "Y outside the support" else
                             f"instance {im.instance}: the sampler returned a token of "
                             f"reference probability 0 at the accepted count both agree on")
        if len(failing) > 1:
            rep.notes.append(f"{len(failing)} of {len(per)} instances differ; the first mismatch "
                             f"shown in full is instance {failing[0].instance}'s")
        if raised:
            rep.notes.append(raised + " (the instances after it were not compared)")
        return rep
    return SamplerReport(True, 1.0, mode, checked, alpha, None, float("nan"), name,
                         rows=checked, ambiguous=ambiguous)


#: Names of a law sampler's fourth parameter (a torch generator), refused by the coins modes.
GENERATOR_NAMES = ("generator", "gen", "rng", "torch_generator")
#: Names of a coin-driven sampler's fourth parameter (uniforms), refused by law and lossless.
COIN_NAMES = ("uniforms", "uniform", "coins", "uniform_samples", "u")


def _fourth_parameter(sampler) -> str | None:
    """The name of the fourth parameter of the outermost user function of ``sampler`` (the
    kit's own wrappers, which carry the guard's mark through ``functools.update_wrapper``,
    skipped), or None when it has none or cannot be read."""
    import inspect

    for f in wrapped_chain(sampler):
        if getattr(f, "_spectheory_guarded", False):
            continue
        try:
            params = list(inspect.signature(f, follow_wrapped=False).parameters.values())
        except (TypeError, ValueError):
            return None
        pos = [x for x in params if x.kind in (x.POSITIONAL_ONLY, x.POSITIONAL_OR_KEYWORD)]
        return pos[3].name if len(pos) >= 4 else None
    return None


def _refuse_kind(sampler, mode: str) -> None:
    """One line for a sampler of the wrong kind, read from its fourth parameter's name: a law
    sampler (``generator``) in a coins mode, a coin-driven one (``uniforms``) in law or lossless
    mode."""
    name = _fourth_parameter(sampler)
    if name is None:
        return
    coins = mode in ("coins", "coins-tau")
    if coins and name.lower() in GENERATOR_NAMES:
        raise SpectheoryError(
            f"{_name_of(wrapped_chain(sampler)[-1])} takes a {name!r} (a law sampler), but mode "
            f"{mode!r} hands a coin-driven sampler its uniforms [B, L+1]: check it with mode "
            f"'law' or 'lossless'")
    if not coins and name.lower() in COIN_NAMES:
        raise SpectheoryError(
            f"{_name_of(wrapped_chain(sampler)[-1])} takes {name!r} (a coin-driven sampler), but "
            f"mode {mode!r} hands a sampler a torch generator: check it with mode 'coins' or "
            f"'coins-tau'")


def _first_call(sampler, args, mode: str):
    """The first call of a coins mode: a sampler that fails by using its uniforms as a torch
    generator is a law sampler, refused in one line."""
    from ...runtime.errors import GeneratorError, UserCodeError

    try:
        return sampler(*args)
    except (UserCodeError, GeneratorError) as exc:
        cause = exc.__cause__
        # the kit's own check of a generator, raised by the kit or inside the user's sampler
        if (isinstance(cause, (TypeError, AttributeError)) and "enerator" in str(cause)) or \
                isinstance(exc, GeneratorError) or isinstance(cause, GeneratorError):
            raise SpectheoryError(
                f"{getattr(sampler, '_spectheory_label', _name_of(sampler))} failed using the "
                f"uniforms [B, L+1] of mode {mode!r} as a torch generator (a law sampler): check "
                f"it with mode 'law' or 'lossless'") from exc
        raise


def _held(f):
    """The objects a wrapper ``f`` holds and may call: its closure cells, its default argument
    values (``lambda d, q, p, u, _f=v1: _f(d, q, p, u)``), the module globals its code names
    (a ``def`` that calls a module-level ``v1``), and for a callable object its attributes. A
    wrapper that held its engine sampler in any of these but a closure was not found, and its
    engine was handed the kit's coins (a PASS for an engine that fails)."""
    import types

    for cell in getattr(f, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    yield from getattr(f, "__defaults__", None) or ()
    yield from (getattr(f, "__kwdefaults__", None) or {}).values()
    if isinstance(f, types.FunctionType):
        glob = f.__globals__
        for name in f.__code__.co_names:
            if name in glob:
                yield glob[name]
    elif not isinstance(f, (types.BuiltinFunctionType, types.MethodType, type)):
        try:
            yield from vars(f).values()
        except TypeError:  # no __dict__ (slots, a C object)
            pass


def _engine_convention(sampler, mode):
    """The sampler's declared ``coin_convention`` (None: the kit's own coins), its own or that of
    a function it wraps (``__wrapped__``, ``functools.partial``; `declared`). Refused in one
    line: two different conventions along the chain, and a wrapper that declares none while a
    function it holds (`_held`: a closure cell, a default argument, a global its code calls, an
    attribute of a callable object) declares one, which would silently hand the wrapped engine
    the kit's coins instead of its own."""
    chain = wrapped_chain(sampler)
    found = [(f, getattr(f, "coin_convention", None)) for f in chain]
    found = [(f, c) for f, c in found if c is not None]
    if len({id(c) for _, c in found}) > 1 and \
            len({getattr(c, "name", repr(c)) for _, c in found}) > 1:
        (f1, c1) = found[0]
        f2, c2 = next((f, c) for f, c in found
                      if getattr(c, "name", repr(c)) != getattr(c1, "name", repr(c1)))
        raise SpectheoryError(
            f"the sampler {_name_of(f1)} declares coin_convention "
            f"{getattr(c1, 'name', c1)!r} but wraps {_name_of(f2)}, which declares "
            f"{getattr(c2, 'name', c2)!r}: declare one convention (the engine's)")
    conv = found[0][1] if found else None
    if conv is None:
        for f in chain:
            for inner in _held(f):
                if not callable(inner) or any(inner is g for g in chain):
                    continue
                hidden = declared(inner, "coin_convention")
                if hidden is not None:
                    raise SpectheoryError(
                        f"the sampler {_name_of(chain[0])} wraps {_name_of(inner)}, which "
                        f"declares coin_convention {getattr(hidden, 'name', hidden)!r}, but "
                        f"declares none itself, so its engine would be handed the kit's coins: "
                        f"wrap it with functools.wraps, or set coin_convention on the wrapper")
        return None
    from ..engines.layouts import CoinConvention

    if not isinstance(conv, CoinConvention):
        raise SpectheoryError(f"the sampler's coin_convention is {type(conv).__name__}, not a "
                              f"spectheory.testing.engines.layouts.CoinConvention")
    if mode == "coins" and not conv.token_coin:
        raise SpectheoryError(f"the sampler's coin convention {conv.name!r} draws the correction "
                              f"token with its own noise (no token coin): use mode 'coins-tau'")
    return conv


def _coin_mismatch(convention, conv, mode, b, d, q, p, u, ue, expected, got, tau_bad, y_bad, V):
    """The report's [`CoinMismatch`][spectheory.testing.checks.report.CoinMismatch] of row ``b``:
    what differs and, for the accepted count, the position that decides it on both sides."""
    if mode == "coins-tau":
        differs = "tau" if tau_bad else "Y outside the support"
    else:
        differs = "tau and Y" if tau_bad and y_bad else "tau" if tau_bad else "Y"
    L = d.shape[0]
    extra = {}
    if tau_bad:
        rt, st = expected[0], got[0]
        pos = min(rt, st) + 1 if convention == "token" else max(rt, st)
        pos = min(max(pos, 1), L)
        thr, _ = _coin_thresholds(convention, d.unsqueeze(0), q.unsqueeze(0).to(torch.float64),
                                  p.unsqueeze(0).to(torch.float64))
        extra.update(position=pos, threshold=float(thr[0, pos - 1]))
        if conv is not None:
            x = int(d[pos - 1])
            eng = (conv.engine_threshold(float(p[pos - 1, x]), float(q[pos - 1, x]))
                   if convention == "token" else conv.engine_threshold(float(thr[0, pos - 1]), 1.0))
            coin = conv.engine_coin(float(ue[pos - 1]))
            extra.update(engine_test=conv.explain(eng, coin), engine_threshold=eng,
                         engine_coin=coin)
    return CoinMismatch(b, list(_tokens(d)), _round_rows(q, V), _round_rows(p, V),
                        [float(v) for v in u], expected, got, differs=differs,
                        engine_uniforms=None if conv is None else [float(v) for v in ue],
                        **extra)

