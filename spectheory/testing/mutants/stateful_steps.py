"""Bugs in the state around the sampler: whole-step replicas with their exact laws over s steps.

A penalty, a min-token mask or a grammar mask at verify position j must read the history the
row follows: the committed context, then the drafts before position j; and the state an engine
keeps across steps must grow by exactly the emitted tokens. Each replica below is a correct step
(token verification as in [`sglang_step`][spectheory.testing.checks.step.sglang_step], or
exact-match verification where the engine verifies that way) with exactly one defect in what its
processors are fed, written from the public thread it cites. Each is a step in the signature of
[`check_step`][spectheory.testing.checks.step.check_step].

**The rule of a replica** (`Rule`) says, for draft row i and verify row j, which sampling
parameters process the model's row and which history they read, as a function of the committed
context ``ctx``, the drafts ``d`` and the state the bug keeps across steps; how the step verifies
(``"token"``: accept x_j with probability min(1, p_j(x_j)/q_j(x_j)), on rejection a token of
norm(max(p_j - q_j, 0)), after L acceptances a bonus token of p_L; ``"match"``: a target token
Y_j of p_j at every position, accepted while it equals the draft); and how the kept state grows.

**Exact laws** ([`stateful_step_law`][spectheory.testing.mutants.stateful_steps.stateful_step_law]):
an enumeration, written apart from the replicas' sampling code, of every step outcome: the draft
paths with their probabilities, the verification's (tau, Y) law on the rows the bug uses, the
context growing step by step and the state the bug keeps; the samples still short of N = s + L
tokens are completed by the correctly processed target. Rows are float64 (penalties act on
logits: `spectheory.inputs.stateful`), so the laws are exact up to float64 rounding.

**The kit's schedule.** `check_step` runs s rounds; in each round it calls the step once per
count c of emitted tokens present among the samples (ascending), on every sample whose count is
c at that moment, so a sample moved to a count still to come in the round is stepped again. A
replica that keeps state across steps (SGLang PR #33643, SGLang PR #28242, vmlx-swift PR #361)
has a law that depends on those step boundaries; the enumeration follows the same schedule,
taking the counts of positive probability as the counts present (true for a batch unless a
count of probability pi is missing from n samples, probability (1 - pi)^n:
[`schedule_gap`][spectheory.testing.mutants.stateful_steps.schedule_gap] bounds it). A stateful
replica tracks its samples by the kit's calling order (a call with an empty context starts a
batch; a call at count c holds, in order, every sample at count c) and raises one line when a
call does not fit.

Replicas (`REPLICAS`: name -> `Replica`):

* SGLang PR #33643 (``sglang-33643-*``): the penalizers are fed ``output_ids[-1]`` once per step,
  so their history holds one token per step (the last emitted), and ``min_new_tokens`` counts
  those entries: steps, not tokens.
* SGLang PR #40244 (``sglang-40244``): one [bs, V] penalty row, from the committed context,
  broadcast to every verify position (the drafts before a position are not counted).
* SGLang #28180 / PRs #28200, #28242 (``sglang-28242``): the penalty applied at the bonus
  position only (verify positions and the correction token unpenalised), from a snapshot one
  round late (the context as it was at the previous step's start) plus the accepted drafts.
* TensorRT-LLM PR #17701 (``trtllm-17701``): one-model speculation ignored the penalties: the
  target rows carry the stateless parameters only.
* vLLM PR #33251, review (``vllm-33251``): the last sampled token (the context's last) counted
  twice at verify positions j >= 1.
* vmlx-swift PR #361 (``vmlx-361``): the draft and verify processor copies share one count
  object: draft row i reads S + d[:i], every verify row reads S + d (all drafts), and the kept
  state grows to S + d + emitted (rejected drafts recorded, accepted ones twice). The step
  verifies by exact match, as mlx's speculative iterator does.
* TGI ``server/text_generation_server/utils/tokens.py`` ``HeterogeneousNextTokenChooser``
  (``tgi-penalty``, ``tgi-grammar``): every speculative position is processed with the same
  ``input_ids`` and FSM state, those of the committed context; exact-match verification.
* mlx-node PR #11 (``mlx-node-11``): ``repetition_penalty`` applied before the first sample of
  the generation only (history: the empty root here, so a no-op), never in the speculative loop.
* vLLM #31858 / PR #44993 with #44297 (``vllm-31858``): a grammar that applies only after a
  reasoning-end token E; positions after an E drafted inside the window are not masked (the mask
  switch is read at the step's start).
* vLLM #42744 / PR #42802 (``vllm-42744``): min_p (argmax-invariant) skipped on the verified
  positions (and so in the residual); only the bonus row honours it.
* TensorRT-LLM PR #19390 (``trtllm-19390``): an unset temperature normalised to the greedy
  sentinel 1e-5 for non-greedy rows: softmax(logits / 1e-5) at every target row.
* mistral.rs PR #2424 (``mistralrs-2424``): the speculative sampler returns the argmax of the
  filtered distribution instead of sampling it, for the draft and the target tokens (verified by
  exact match).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ...inputs.instances import Instance
from ...inputs.processing import SamplingParams, parse_sampling, process_rows
from ...inputs.random_instances import random_instance
from ...inputs.stateful import TokenAutomaton
from ...inputs.instances import check_instance
from ...runtime.errors import OptionError, TimeLimitError
from ...runtime.errors import check_whole as _whole
from ...runtime.errors import SpectheoryError
from ..checks.step import PLACEHOLDER, StepRequest, _streams, processed
from ...runtime.limits import shown as _repr_cut

__all__ = ["REPLICAS", "Replica", "Rule", "RULES", "ReplicaStep", "after_token_grammar",
           "check_step_power", "draft_half",
           "effective_frequency_penalty", "no_repeat_grammar", "replica_step", "schedule_gap",
           "stateful_instance", "stateful_step_law", "toy_repeat_instance", "tv"]

#: Reasoning-end token of the vLLM #31858 replica's grammar.
REASONING_END = 2
#: The temperature TensorRT-LLM's greedy sentinel stands for (``DISABLE_TEMP_VAL``).
GREEDY_SENTINEL = 1e-5


# ----------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """What one replica feeds its processors.

    ``draft(ctx, d, state, sp, dp) -> (params, history)`` for the draft row after ``d`` (the
    drafts so far); ``verify(ctx, d, j, state, sp, dp) -> (params, history)`` for target row j
    (``d`` all L drafts); histories are tuples of token ids; ``verify_kind`` "token" or "match";
    ``pick`` "sample" or "argmax" (how draft and, under "match", target tokens are chosen);
    ``update(state, ctx, d, emitted) -> state`` (None: the step keeps no state across steps)."""

    name: str
    draft: Callable
    verify: Callable
    verify_kind: str = "token"
    pick: str = "sample"
    update: Callable | None = None


def _correct_draft(ctx, d, state, sp, dp):
    return dp, ctx + d


def _correct_verify(ctx, d, j, state, sp, dp):
    return sp, ctx + d[:j]


_DERIVED: dict = {}


def _derive(sp, kind, make):
    """``make(sp)``, memoised per parameters object (kept alive in the cache, so its id is not
    reused while cached)."""
    if sp is None:
        return None
    k = (id(sp), kind)
    hit = _DERIVED.get(k)
    if hit is None:
        if len(_DERIVED) > 4096:
            _DERIVED.clear()
        hit = _DERIVED[k] = (sp, make(sp))
    return hit[1]


def _stateless(sp):
    return _derive(sp, "stateless", lambda s: s.stateless())


def _replace(sp, **kw):
    return _derive(sp, tuple(sorted(kw.items())), lambda s: dataclasses.replace(s, **kw))


def _sg33643_verify(ctx, d, j, state, sp, dp):
    return sp, tuple(state) + d[:j]


def _sg33643_update(state, ctx, d, emitted):
    return tuple(state) + (emitted[-1],)


def _sg40244_verify(ctx, d, j, state, sp, dp):
    return sp, ctx


def _sg28242_verify(ctx, d, j, state, sp, dp):
    if j < len(d):
        return _stateless(sp), ctx + d[:j]
    return sp, tuple(state) + d


def _sg28242_update(state, ctx, d, emitted):
    return ctx  # the snapshot the next step reads: this step's starting context


def _trt17701_verify(ctx, d, j, state, sp, dp):
    return _stateless(sp), ctx + d[:j]


def _v33251_verify(ctx, d, j, state, sp, dp):
    h = ctx + d[:j]
    if j >= 1 and ctx:
        h = h + (ctx[-1],)
    return sp, h


def _vmlx_draft(ctx, d, state, sp, dp):
    return sp, tuple(sorted(tuple(state) + d))


def _vmlx_verify(ctx, d, j, state, sp, dp):
    return sp, tuple(sorted(tuple(state) + d))


def _vmlx_update(state, ctx, d, emitted):
    # counts only: kept as a sorted multiset
    return tuple(sorted(tuple(state) + d + tuple(emitted)))


def _tgi_verify(ctx, d, j, state, sp, dp):
    return sp, ctx


def _mlxnode_verify(ctx, d, j, state, sp, dp):
    if not ctx and j == 0:
        return sp, ()
    return _stateless(sp), ctx + d[:j]


def _v31858_verify(ctx, d, j, state, sp, dp):
    if REASONING_END not in ctx and REASONING_END in d[:j]:
        return _replace(sp, grammar=None), ctx + d[:j]
    return sp, ctx + d[:j]


def _v42744_verify(ctx, d, j, state, sp, dp):
    if j < len(d):
        return _replace(sp, min_p=0.0), ctx + d[:j]
    return sp, ctx + d[:j]


def _trt19390_verify(ctx, d, j, state, sp, dp):
    if sp is not None and not sp.greedy:
        return _replace(sp, temperature=GREEDY_SENTINEL), ctx + d[:j]
    return sp, ctx + d[:j]


#: name -> Rule; "correct" and "correct-match" are the lossless references.
RULES = {
    "correct": Rule("correct", _correct_draft, _correct_verify),
    "correct-match": Rule("correct-match", _correct_draft, _correct_verify, "match"),
    "sglang-33643": Rule("sglang-33643", _correct_draft, _sg33643_verify,
                         update=_sg33643_update),
    "sglang-40244": Rule("sglang-40244", _correct_draft, _sg40244_verify),
    "sglang-28242": Rule("sglang-28242", _correct_draft, _sg28242_verify,
                         update=_sg28242_update),
    "trtllm-17701": Rule("trtllm-17701", _correct_draft, _trt17701_verify),
    "vllm-33251": Rule("vllm-33251", _correct_draft, _v33251_verify),
    "vmlx-361": Rule("vmlx-361", _vmlx_draft, _vmlx_verify, "match", update=_vmlx_update),
    "tgi": Rule("tgi", _correct_draft, _tgi_verify, "match"),
    "mlx-node-11": Rule("mlx-node-11", _correct_draft, _mlxnode_verify),
    "vllm-31858": Rule("vllm-31858", _correct_draft, _v31858_verify),
    "vllm-42744": Rule("vllm-42744", _correct_draft, _v42744_verify),
    "trtllm-19390": Rule("trtllm-19390", _correct_draft, _trt19390_verify),
    "mistralrs-2424": Rule("mistralrs-2424", _correct_draft, _correct_verify, "match",
                           pick="argmax"),
}


# ----------------------------------------------------------------------------- the replicas


def _key(params):
    """A hashable identity of sampling parameters (their text, which names the grammar)."""
    return _derive(params, "key", lambda s: (str(s), s.order))


class ReplicaStep:
    """A step (``step(request) -> emitted [B, L+1]``) running ``rule`` in torch: one draft model
    call per draft position, one target call, rows processed per (parameters, history length)
    group by the kit's `processed`, drafts and target tokens by ``torch.multinomial`` (or argmax),
    token verification by the port
    [`sglang_chain_sample`][spectheory.testing.engines.adapters.sglang_chain_sample] with separate
    coins. A rule that keeps state across steps tracks the samples by the kit's calling order."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.__name__ = f"{rule.name.replace('-', '_')}_step"
        self._rows: list = []  # [(emitted tuple, state)] of the current batch

    # -- state

    def _states(self, ctx: torch.Tensor) -> list:
        B, n = ctx.shape
        if self.rule.update is None:
            return [()] * B
        if n == 0:
            self._rows = [((), ()) for _ in range(B)]
            return [()] * B
        idx = [i for i, (s, _) in enumerate(self._rows) if len(s) == n]
        rows = [tuple(r) for r in ctx.tolist()]
        if len(idx) != B or any(self._rows[i][0] != r for i, r in zip(idx, rows)):
            raise SpectheoryError(f"{self.rule.name}: this replica keeps state across steps and "
                                  f"tracks its samples by check_step's calling order; a call of "
                                  f"{B} rows at count {n} does not fit it")
        self._slots = idx
        return [self._rows[i][1] for i in idx]

    def _commit(self, ctx_rows, states, drafts, emitted):
        if self.rule.update is None:
            return
        n = len(ctx_rows[0]) if ctx_rows else 0
        slots = self._slots if n else list(range(len(ctx_rows)))
        for i, c, st, d, e in zip(slots, ctx_rows, states, drafts, emitted):
            self._rows[i] = (c + e, self.rule.update(st, c, d, e))

    # -- rows

    @staticmethod
    def _process(rows, specs, inputs):
        """rows [B, V] processed row by row by specs [(params, history tuple)], grouped."""
        out = torch.empty(rows.shape, dtype=torch.float64)
        groups: dict = {}
        keys: dict = {}  # id -> _key, per parameters object (specs keeps each one alive)
        for b, (params, h) in enumerate(specs):
            k = keys.get(id(params))
            if k is None:
                k = keys[id(params)] = _key(params)
            groups.setdefault((k, len(h)), (params, []))[1].append(b)
        for (_, m), (params, idx) in groups.items():
            sel = torch.tensor(idx, dtype=torch.long)
            hist = torch.tensor([specs[b][1] for b in idx], dtype=torch.long).reshape(len(idx), m)
            out[sel] = processed(rows[sel], params, inputs, history=hist)
        return out

    def _choose(self, probs, g):
        if self.rule.pick == "argmax":
            return torch.argmax(probs, dim=-1)
        return torch.multinomial(probs, 1, generator=g)[:, 0]

    def __call__(self, request: StepRequest):
        from ..engines.adapters import sglang_chain_sample

        ctx = request.context
        B, L = ctx.shape[0], request.num_draft
        sp, dp = parse_sampling(request.sampling), parse_sampling(request.draft_sampling)
        states = self._states(ctx)
        ctx_rows = [tuple(r) for r in ctx.tolist()]
        g_draft, g_coin, g_final = _streams(request, 3)
        drafts = torch.empty(B, 0, dtype=torch.long)
        qs = []
        for _ in range(L):
            seq = torch.cat([ctx, drafts], dim=1)
            raw = request.draft(seq)[:, -1]
            dl = [tuple(r) for r in drafts.tolist()]
            specs = [self.rule.draft(c, d, s, sp, dp) for c, d, s in zip(ctx_rows, dl, states)]
            q = self._process(raw, specs, request.inputs)
            x = self._choose(q, g_draft)
            qs.append(q)
            drafts = torch.cat([drafts, x.unsqueeze(1)], dim=1)
        seq = torch.cat([ctx, drafts], dim=1)
        raw = request.target(seq)[:, ctx.shape[1]:]  # [B, L+1, V]
        dl = [tuple(r) for r in drafts.tolist()]
        p = torch.stack([self._process(raw[:, j], [self.rule.verify(c, d, j, s, sp, dp)
                                                   for c, d, s in zip(ctx_rows, dl, states)],
                                       request.inputs) for j in range(L + 1)], dim=1)
        if self.rule.verify_kind == "token":
            q = torch.stack(qs, dim=1)
            coins = 1.0 - torch.rand(B, L + 1, generator=g_coin, dtype=torch.float64)
            final = torch.rand(B, generator=g_final, dtype=torch.float64)
            out, _ = sglang_chain_sample(q, drafts, coins, p, final)
        else:
            y = torch.stack([self._choose(p[:, j], g_coin) for j in range(L + 1)], dim=1)
            same = torch.cat([(y[:, :L] == drafts).long(), torch.zeros(B, 1, dtype=torch.long)],
                             dim=1)
            tau = torch.cumprod(same, dim=1).sum(1)  # accepted drafts
            out = torch.full((B, L + 1), PLACEHOLDER, dtype=torch.long)
            keep = torch.arange(L + 1).unsqueeze(0) <= tau.unsqueeze(1)
            out[keep] = y[keep]
        emitted = [tuple(t for t in r if t >= 0) for r in out.tolist()]
        self._commit(ctx_rows, states, dl, emitted)
        return out


def replica_step(name: str) -> ReplicaStep:
    """A fresh replica step for rule ``name`` of `RULES` (stateful replicas keep per-batch
    state: use one object per run)."""
    return ReplicaStep(_rule(name))


def _rule(rule) -> "Rule":
    """A `Rule`, or the one of `RULES` named; another name or object refused in one line."""
    if isinstance(rule, Rule):
        return rule
    if not isinstance(rule, str) or rule not in RULES:
        raise OptionError(f"unknown stateful rule {_repr_cut(rule, 40)}; choose from "
                          f"{', '.join(RULES)}")
    return RULES[rule]


def draft_half(name: str, draft_sampling="top_p=0.9") -> Callable:
    """The drafting half of a replica as a draft sampler for
    [`check_proposal`][spectheory.testing.checks.sampler.check_proposal]
    (``(q_rows [B, V], generator) -> (tokens [B], q_reported [B, V])``). Only mistral.rs PR #2424
    has a half that holds its defect (the argmax of the filtered rows, reported as the filtered
    rows); every other replica drafts correctly from the rows it reports, and its defect lies in
    the histories its processors read, which no half sees."""
    if name != "mistralrs-2424":
        raise OptionError(f"{_repr_cut(name, 40)}: no half of this replica holds its defect (only "
                          "'mistralrs-2424' has one)")
    dp = parse_sampling(draft_sampling)

    def mistralrs_2424_draft_half(q_rows, generator=None):
        q = q_rows.to(torch.float64) if dp is None else process_rows(q_rows.to(torch.float64), dp)
        return torch.argmax(q, dim=-1), q

    return mistralrs_2424_draft_half


# ----------------------------------------------------------------------------- exact laws


class _Rows:
    """Processed rows after a history, memoised: the instance's raw row after the model history,
    processed by ``params`` reading ``history`` (numpy float64 `process_rows`, one row at a
    time)."""

    def __init__(self, instance: Instance):
        self.inst = instance.to_float()
        self.V = self.inst.vocab_size
        self.cache: dict = {}

    def row(self, which: str, model_hist: tuple, params, history: tuple) -> np.ndarray:
        key = (which, model_hist, _key(params), history)
        r = self.cache.get(key)
        if r is None:
            model = self.inst.target if which == "target" else self.inst.draft
            raw = np.asarray(model.conditional(model_hist), dtype=np.float64).reshape(1, self.V)
            if params is None:
                r = raw[0] / raw[0].sum()
            else:
                h = np.asarray(history, dtype=np.int64).reshape(1, len(history))
                r = np.asarray(process_rows(raw, params, history=h), dtype=np.float64)[0]
            self.cache[key] = r
        return r

    def fill(self, specs) -> None:
        """Compute the rows of ``specs`` [(which, model_hist, params, history)] missing from the
        cache with one `process_rows` call per (parameters, history length): process_rows
        works row by row along the last axis, so each row is the one `row` computes alone. A
        group that raises is left out, for `row` to raise its line in the enumeration's
        order."""
        groups: dict = {}
        for which, model_hist, params, history in specs:
            key = (which, model_hist, _key(params), history)
            if key in self.cache:
                continue
            if params is None:
                self.row(which, model_hist, params, history)
                continue
            todo = groups.setdefault((key[2], len(history)), (params, {}))[1]
            todo.setdefault(key, (which, model_hist, history))
        for (_, m), (params, todo) in groups.items():
            try:
                raw = np.stack([np.asarray((self.inst.target if w == "target" else
                                            self.inst.draft).conditional(mh),
                                           dtype=np.float64).reshape(self.V)
                                for w, mh, _ in todo.values()])
                h = np.asarray([hh for _, _, hh in todo.values()],
                               dtype=np.int64).reshape(len(todo), m)
                out = np.asarray(process_rows(raw, params, history=h), dtype=np.float64)
            except TimeLimitError:  # the run's clock: stopping is the answer, never a retry
                raise
            except Exception:  # noqa: BLE001 - `row` raises it again, one row at a time
                continue
            for key, r in zip(todo, out):
                self.cache[key] = r


def _prefetch(rule: Rule, rows: _Rows, items: list, L: int, sp, dp) -> None:
    """Fill ``rows`` with every row `_step_outcomes` reads from each ``(ctx, state)`` of
    ``items``, level by level of the draft trees (the drafts of positive probability): each
    level of all the trees, then all their target rows, in one `_Rows.fill` (a few
    `process_rows` calls for a whole round of contexts). A context whose draft row is missing
    (its group raised) stops there: the enumeration meets that row in its own order."""
    frontiers = [(ctx, state, [()]) for ctx, state in items]
    for _ in range(L):
        specs = [[("draft", ctx + d) + tuple(rule.draft(ctx, d, state, sp, dp)) for d in fr]
                 for ctx, state, fr in frontiers]
        rows.fill([s for group in specs for s in group])
        nxt_frontiers = []
        for (ctx, state, fr), group in zip(frontiers, specs):
            nxt = []
            for d, (which, model_hist, params, h) in zip(fr, group):
                q = rows.cache.get((which, model_hist, _key(params), h))
                if q is None:
                    break
                law = _argmax_row(q) if rule.pick == "argmax" else q
                nxt.extend(d + (x,) for x in range(rows.V) if law[x] > 0)
            else:
                nxt_frontiers.append((ctx, state, nxt))
        frontiers = nxt_frontiers
    rows.fill([("target", ctx + d[:j]) + tuple(rule.verify(ctx, d, j, state, sp, dp))
               for ctx, state, fr in frontiers for d in fr for j in range(L + 1)])


def _argmax_row(r: np.ndarray) -> np.ndarray:
    out = np.zeros_like(r)
    out[int(np.argmax(r))] = 1.0
    return out


def _step_outcomes(rule: Rule, rows: _Rows, ctx: tuple, state, L: int, sp, dp,
                   prefetch: bool = True):
    """{(emitted block, new state): probability} of one step of ``rule`` from ``ctx``
    (``prefetch=False``: the caller has run `_prefetch` on it already)."""
    V = rows.V
    out: dict = {}
    if prefetch:
        _prefetch(rule, rows, [(ctx, state)], L, sp, dp)

    def add(block, mass, d):
        if mass <= 0:
            return
        st = rule.update(state, ctx, d, block) if rule.update is not None else ()
        k = (block, st)
        out[k] = out.get(k, 0.0) + mass

    def drafts(d, mass, qs):
        if len(d) == L:
            verify(d, mass, qs)
            return
        params, h = rule.draft(ctx, d, state, sp, dp)
        q = rows.row("draft", ctx + d, params, h)
        law = _argmax_row(q) if rule.pick == "argmax" else q
        for x in range(V):
            if law[x] > 0:
                drafts(d + (x,), mass * law[x], qs + [q])

    def verify(d, mass, qs):
        ps = []
        for j in range(L + 1):
            params, h = rule.verify(ctx, d, j, state, sp, dp)
            p = rows.row("target", ctx + d[:j], params, h)
            ps.append(_argmax_row(p) if rule.pick == "argmax" else p)
        alive = mass
        for j in range(L):
            x = d[j]
            if rule.verify_kind == "token":
                a = min(1.0, ps[j][x] / qs[j][x])
                r = np.maximum(ps[j] - qs[j], 0.0)
                if r.sum() <= 0:  # p = q up to rounding: a rejection of mass ~1e-16
                    a = 1.0
                if a < 1:
                    r = r / r.sum()
                    for y in range(V):
                        add(d[:j] + (y,), alive * (1 - a) * r[y], d)
            else:
                a = ps[j][x]
                for y in range(V):
                    if y != x:
                        add(d[:j] + (y,), alive * ps[j][y], d)
            alive *= a
            if alive <= 0:
                return
        for y in range(V):
            add(d + (y,), alive * ps[L][y], d)

    drafts((), 1.0, [])
    return out


def stateful_step_law(rule, instance: Instance, steps: int, sampling=None, draft_sampling=None,
                      num_draft: int | None = None, *, schedule: list | None = None) -> np.ndarray:
    """Exact law ``[V^N]`` (N = steps + L; flat index base V, first token most significant) of
    the first N tokens of ``steps`` rounds of ``rule`` (a `Rule` or a name of `RULES`) under
    `check_step`'s schedule, completed by the target processed by ``sampling`` with each row's
    own history (see the module docstring). ``schedule``: a list to which the masses of the
    counts stepped in each round are appended (for `schedule_gap`)."""
    rule = _rule(rule)
    sp, dp = parse_sampling(sampling), parse_sampling(draft_sampling)
    if not isinstance(instance, Instance):
        raise OptionError(f"instance must be a spectheory Instance, not "
                          f"{type(instance).__name__}")
    check_instance(instance)
    inst = instance.to_float()
    V = inst.vocab_size
    steps = _whole("steps", steps, 1, 64)
    L = inst.block_length if num_draft is None else _whole("num_draft", num_draft, 1, 64)
    N = steps + L
    if V ** N > 2**16:
        from ...runtime.errors import SizeLimitError

        raise SizeLimitError(f"stateful_step_law enumerates V^N sequences, N = steps + L = {N}: "
                             f"{V}^{N} is over 2^16; use fewer steps or a shorter block")
    rows = _Rows(inst)
    memo: dict = {}
    states: dict = {((), ()): 1.0}
    for _ in range(steps):
        mass_at: dict = {}
        for (seq, _), m in states.items():
            if m > 0 and len(seq) < N:
                mass_at[len(seq)] = mass_at.get(len(seq), 0.0) + m
        if schedule is not None:
            schedule.append(dict(mass_at))
        for c in sorted(mass_at):
            todo = [(k, m) for k, m in states.items() if len(k[0]) == c]
            for k, _ in todo:
                del states[k]
            # the rows of every context of this count at once (each row is the one
            # `_Rows.row` computes alone: `_Rows.fill`)
            _prefetch(rule, rows, [k for k, _ in todo if k not in memo], L, sp, dp)
            for (seq, st), m in todo:
                key = (seq, st)
                if key not in memo:
                    memo[key] = _step_outcomes(rule, rows, seq, st, L, sp, dp, prefetch=False)
                for (block, st2), w in memo[key].items():
                    k2 = (seq + block, st2)
                    states[k2] = states.get(k2, 0.0) + m * w
    law = np.zeros(V ** N, dtype=np.float64)

    def complete(seq, m):
        if len(seq) >= N:
            idx = 0
            for t in seq[:N]:
                idx = idx * V + t
            law[idx] += m
            return
        r = rows.row("target", seq, sp, seq)
        for y in range(V):
            if r[y] > 0:
                complete(seq + (y,), m * r[y])

    for (seq, _), m in states.items():
        complete(seq, m)
    if abs(law.sum() - 1) > 1e-9:
        raise AssertionError(f"the law of {rule.name} sums to {law.sum()!r}")
    return law


def schedule_gap(rule, instance: Instance, steps: int, samples: int, sampling=None,
                 draft_sampling=None) -> float:
    """Upper bound on the probability that `check_step`'s schedule departs from the one
    `stateful_step_law` assumes on ``samples`` samples: the sum over rounds and counts of
    (1 - pi)^samples, pi the probability of the count at the round's start (a count missing
    from the batch is not stepped). Matters only for rules that keep state across steps."""
    samples = _whole("samples", samples, 1, 10**9)
    sched: list = []
    stateful_step_law(rule, instance, steps, sampling, draft_sampling, schedule=sched)
    return float(sum((1 - pi) ** samples for rnd in sched for pi in rnd.values()))


def check_step_power(law, target, samples: int, alpha: float = 1e-3, trials: int = 2000,
                     seed: int = 0) -> float:
    """Monte Carlo power of `check_step` on one instance against a step whose sequences follow
    ``law`` while the reference is ``target`` (both ``[V^N]``): the fraction of ``trials``
    multinomial samples of ``law`` that the check's own statistic (the pooled chi-square of
    `spectheory.testing.statistics.stats` and its family) rejects at ``alpha``. Standard error at
    most 0.5 / sqrt(trials). At a few hundred samples over 81 cells the non-central chi-square
    approximation of [`detection_power`][spectheory.testing.checks.step.detection_power] is
    optimistic; this is not an approximation."""
    from ..statistics import stats
    from ..checks.report import MIN_EXPECTED

    samples = _whole("samples", samples, 1, 10**9)
    trials = _whole("trials", trials, 1, 100_000)
    rng = np.random.default_rng(seed)
    law = np.asarray(law, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if law.ndim != 1 or law.shape != target.shape or not np.isfinite(law).all() \
            or (law < 0).any() or law.sum() <= 0:
        raise OptionError("check_step_power: law and target must be laws of one shape [V^N] "
                          "(finite, non-negative; law with a positive sum)")
    law = law / law.sum()
    hits = 0
    for obs in rng.multinomial(int(samples), law, size=int(trials)):
        t = stats.row_chi_square(obs, target, int(samples), MIN_EXPECTED)
        hits += stats.family([t]).p_value <= alpha
    return hits / trials


def tv(law, target) -> float:
    """Total variation between two laws of one shape."""
    a, b = np.asarray(law, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if a.shape != b.shape:
        raise OptionError(f"tv: laws of shapes {list(a.shape)} and {list(b.shape)}")
    return float(np.abs(a - b).sum() / 2)


# ----------------------------------------------------------------------------- grammars


def after_token_grammar(end: int = REASONING_END, banned: int = 1, V: int = 3) -> TokenAutomaton:
    """A grammar that applies only after a reasoning-end token ``end``: state 0 (reasoning)
    allows every token, ``end`` moves to state 1, where ``banned`` is rejected."""
    V = _whole("V", V, 1, 4096)
    end, banned = _whole("end", end, 0, V - 1), _whole("banned", banned, 0, V - 1)
    s0 = [0] * V
    s0[end] = 1
    s1 = [1] * V
    s1[banned] = -1
    return TokenAutomaton([s0, s1], name=f"after-{end}-no-{banned}")


def no_repeat_grammar(V: int = 3) -> TokenAutomaton:
    """No token twice in a row: state 0 is the start, state t+1 follows token t and rejects t."""
    V = _whole("V", V, 1, 4096)  # a (V + 1) x V table
    table = [[t + 1 for t in range(V)]]
    for s in range(V):
        table.append([-1 if t == s else t + 1 for t in range(V)])
    return TokenAutomaton(table, name="no-immediate-repeat")


# ----------------------------------------------------------------------------- instances


def stateful_instance() -> Instance:
    """V = 3, L = 2: ``random_instance(3, 2, 2, denominator=12)``: prefix-dependent target and
    draft rows in multiples of 1/12, every entry positive, five target rows with a tie (root
    target (1/6, 1/4, 7/12), root draft (5/12, 5/12, 1/6))."""
    return random_instance(3, 2, 2, denominator=12)


def toy_repeat_instance() -> Instance:
    """V = 3, L = 2 with the draft equal to the target (prefix-dependent): every draft is
    accepted by the raw target, so the steps are long and the per-step penalty state of SGLang
    PR #33643 falls furthest behind."""
    inst = random_instance(3, 2, 2, denominator=12)
    return Instance(3, 2, inst.target, inst.target)


def effective_frequency_penalty(nominal: float, steps: int = 4, instance: Instance | None = None,
                                tol: float = 1e-10) -> dict:
    """SGLang PR #33643's frequency penalty made precise: the frequency penalty f' with which a
    CORRECT engine's law of the first N = steps + L tokens has the same expected number of
    repeats (positions whose token occurred earlier in the sequence) as the buggy replica's law
    at ``nominal``, by bisection (the expectation falls as f' grows). Returns ``{"nominal",
    "effective", "ratio", "repeats_buggy", "repeats_nominal", "tokens_per_step"}``
    (tokens_per_step: the buggy law's mean emitted tokens per step over the first step)."""
    from ..checks.step import target_sequence_law

    inst = toy_repeat_instance() if instance is None else instance

    def sp(f):
        return SamplingParams(frequency_penalty=f)

    if isinstance(nominal, bool) or not isinstance(nominal, numbers.Real) or \
            not 0 < float(nominal) < float("inf"):
        raise OptionError(f"nominal = {_repr_cut(nominal, 40)} must be a positive finite frequency "
                          "penalty (the bisection runs between 0 and it)")
    # the law first: it guards steps and the V^N sequences before the repeats enumerate them
    buggy = stateful_step_law("sglang-33643", inst, steps, sp(nominal))
    V, L = inst.vocab_size, inst.block_length
    N = steps + L
    seqs = np.array(np.unravel_index(np.arange(V ** N), (V,) * N)).T  # [V^N, N]
    rep = np.array([sum(1 for i in range(N) if s[i] in s[:i]) for s in seqs], dtype=np.float64)
    want = float(buggy @ rep)
    lo, hi = 0.0, float(nominal)

    def repeats(f):
        return float(target_sequence_law(inst, N, sp(f)) @ rep)

    if repeats(lo) < want or repeats(hi) > want:
        raise OptionError(f"the buggy law's repeats are not bracketed by frequency penalties 0 "
                          f"and {nominal:g} on this instance")
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if repeats(mid) > want:
            lo = mid
        else:
            hi = mid
    f_eff = (lo + hi) / 2
    rows = _Rows(inst)
    first = _step_outcomes(RULES["sglang-33643"], rows, (), (), L, sp(nominal), None)
    mean = sum(len(b) * w for (b, _), w in first.items())
    return {"nominal": float(nominal), "effective": f_eff, "ratio": f_eff / nominal,
            "repeats_buggy": want, "repeats_nominal": repeats(float(nominal)),
            "tokens_per_step": mean}


# ----------------------------------------------------------------------------- the kit


@dataclass(frozen=True)
class Replica:
    """One entry of `REPLICAS`: ``rule`` (a name of `RULES`), the project and thread, the
    request's ``sampling`` (a factory: grammars are objects), the ``steps`` of the stated check,
    and ``samples``, at which `check_step` (one instance, alpha = 1e-3, the stated steps) has
    power >= 0.99 against the exact law (`check_step_power`, Monte Carlo of the check's own
    statistic), with a margin: 1.5 times that count, rounded up, at least 100."""

    rule: str
    project: str
    thread: str
    sampling: Callable
    steps: int
    samples: int
    what: str


def _sp(**kw) -> Callable:
    return lambda: SamplingParams(**kw)


REPLICAS = {
    "sglang-33643-frequency": Replica(
        "sglang-33643", "SGLang", "PR #33643", _sp(frequency_penalty=1.0), 2, 1_400,
        "penalizers fed output_ids[-1] once per step: one token per step in the counts"),
    "sglang-33643-min-tokens": Replica(
        "sglang-33643", "SGLang", "PR #33643", _sp(min_tokens=3, stop_token_ids=(2,)), 2, 250,
        "min_new_tokens counts steps, not tokens: the stop token masked too long"),
    "sglang-40244": Replica(
        "sglang-40244", "SGLang", "PR #40244", _sp(frequency_penalty=1.0), 2, 850,
        "one [bs, V] penalty row from the committed context broadcast to every verify position"),
    "sglang-28242": Replica(
        "sglang-28242", "SGLang", "#28180 / PRs #28200, #28242", _sp(repetition_penalty=2.0), 2,
        1_600, "repetition penalty at the bonus position only, from a snapshot one round late"),
    "trtllm-17701": Replica(
        "trtllm-17701", "TensorRT-LLM", "PR #17701", _sp(frequency_penalty=1.0), 2, 350,
        "one-model speculation ignores the penalties: target unpenalised"),
    "vllm-33251": Replica(
        "vllm-33251", "vLLM", "PR #33251 (review)", _sp(frequency_penalty=1.0), 2, 3_100,
        "the last sampled token counted twice at verify positions j >= 1"),
    "vmlx-361": Replica(
        "vmlx-361", "vmlx-swift", "PR #361", _sp(frequency_penalty=1.0), 2, 500,
        "draft and verify processor copies share counts: rejected drafts recorded, accepted "
        "twice"),
    "tgi-penalty": Replica(
        "tgi", "TGI", "utils/tokens.py HeterogeneousNextTokenChooser",
        _sp(frequency_penalty=1.0), 2, 1_900,
        "every speculative position penalised with the committed input_ids"),
    "tgi-grammar": Replica(
        "tgi", "TGI", "utils/tokens.py HeterogeneousNextTokenChooser",
        lambda: SamplingParams(grammar=no_repeat_grammar()), 2, 100,
        "every speculative position masked at the committed FSM state"),
    "mlx-node-11": Replica(
        "mlx-node-11", "mlx-node", "PR #11", _sp(repetition_penalty=2.0), 2, 1_200,
        "repetition penalty before the generation's first sample only"),
    "vllm-31858": Replica(
        "vllm-31858", "vLLM", "#31858 / PR #44993 (with #44297)",
        lambda: SamplingParams(grammar=after_token_grammar()), 2, 100,
        "positions after a reasoning-end token drafted inside the window not masked"),
    "vllm-42744": Replica(
        "vllm-42744", "vLLM", "#42744 / PR #42802", _sp(min_p=0.5), 2, 100,
        "min_p skipped on verified positions; the bonus row honours it"),
    "trtllm-19390": Replica(
        "trtllm-19390", "TensorRT-LLM", "PR #19390", _sp(top_k=2), 2, 100,
        "an unset temperature normalised to the greedy sentinel 1e-5: top_k alone is greedy"),
    "mistralrs-2424": Replica(
        "mistralrs-2424", "mistral.rs", "PR #2424", _sp(top_p=0.9), 2, 150,
        "argmax of the filtered distribution instead of a sample, drafts and target"),
}
