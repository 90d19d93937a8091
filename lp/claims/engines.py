"""Engine behaviour: statements from serving engines' issues and pull requests, and what their code
does, checked exactly.

* Reference-code and kernel bugs replicated in the bug kit
  ([`spectheory.testing.mutants`][spectheory.testing.mutants]), and the kit's engine claims
  (its ``CLAIMS``), shown here as ledger rows.
* The coin comparison of token verification (Leviathan et al., Algorithm 1: accept the draft x
  when a uniform r satisfies r <= p(x)/q(x)). Engines draw r with ``torch.rand``, whose float32
  values on the CPU generator are the grid k 2^-24 (k = 0 .. 2^24 - 1) and float64 values the grid
  k 2^-53, each point with probability 2^-24 (resp. 2^-53); the tests check the grid on torch
  2.13. CUDA generators reach 0 differently; the rows state the CPU grid. So
  P(r <= t) = min(1, (floor(t 2^b) + 1) / 2^b) and P(r < t) = min(1, ceil(t 2^b) / 2^b): with
  ``<=`` (or vLLM V1's ``p/q >= r``) a draft whose target probability is 0 is accepted with
  probability 2^-b, with ``<`` never.
  `coin_token_law` is the exact output law of one iteration of token verification under such a
  coin, on instances whose ratios p/q are dyadic, so that the engine computes them exactly in
  floating point and the law is the engine's, not a model of it.
* Sample-match verification ("sampled verify": accept a draft token while the target's own
  sample at that position equals it, emit the target's sample at the first mismatch), and its
  multi-candidate forms (fms-extras #12 and PR #17). `sample_match_law` is its exact law.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Callable

from .common import OURS, Claim, Finding, Hypotheses, be, f, note, one, toy

# ----------------------------------------------------------------------------- bug-kit rows


def _mutant(name, inst, drafting, K) -> Finding:
    from spectheory.testing.mutants import MUTANTS

    note(inst, drafting, K)
    c = MUTANTS[name].catch()
    return Finding(f"TV {f(c.tv) if isinstance(c.tv, Fraction) else f'{float(c.tv):.3g}'}, "
                   f"first offending sequence {c.offending}", "refuted" if c.caught else
                   "confirmed", MUTANTS[name].caught_by)


def c_vllm_40819() -> Finding:
    from spectheory.inputs.random_instances import random_instance

    return _mutant("vllm-40819-block-wrong-row", random_instance(3, 3, 0, denominator=60),
                   "single", 1)


def c_gbv_ref_tie() -> Finding:
    return _mutant("gbv-ref-tie-rule", one(["1/2", "1/2"], ["1/2", "1/2"]), "iid", 2)


def c_gbv_ref_leaf() -> Finding:
    return _mutant("gbv-ref-traversal-first-leaf", toy(), "iid", 3)


# ----------------------------------------------------------------------------- coins


def _table(inst):
    """(p(prefix) row, q(prefix) row) readers of an exact instance."""
    V = inst.vocab_size

    def index(prefix):
        n = 0
        for a in prefix:
            n = n * V + a
        return n

    rows: dict = {}  # the rows read so far (the enumerations read each one many times)

    def p(prefix):
        key = ("p", prefix)
        if key not in rows:
            rows[key] = [Fraction(x) for x in inst.target.level(len(prefix))[index(prefix)]]
        return rows[key]

    def q(prefix):
        key = ("q", prefix)
        if key not in rows:
            rows[key] = [Fraction(x) for x in inst.draft.level(len(prefix))[index(prefix)]]
        return rows[key]

    return p, q


def coin_accept(t: Fraction, bits: int, strict: bool) -> Fraction:
    """P(coin <= t) (``strict``: P(coin < t)) for a coin uniform on the grid k 2^-bits,
    k = 0 .. 2^bits - 1 (``torch.rand`` in float32: bits = 24; float64: bits = 53)."""
    n = 2**bits
    if t >= 1:
        return Fraction(1)
    scaled = t * n
    k = -((-scaled.numerator) // scaled.denominator) if strict else scaled.numerator // \
        scaled.denominator + 1  # ceil for <, floor + 1 for <=
    return min(Fraction(1), Fraction(k, n))


def coin_token_law(inst, bits: int, strict: bool):
    """Exact law of the L + 1 tokens (emitted block, then target sampling) of token verification
    whose acceptance is P(coin <= p/q) (``strict``: <) with the coin of `coin_accept`; the
    residual is normalise(max(p - q, 0)) (p where it has no mass) and the bonus token is drawn from
    p. Returns {sequence of length L + 1: probability}."""
    p, q = _table(inst)
    V, L = inst.vocab_size, inst.block_length
    law: dict = {}

    def extend(prefix, mass):  # target sampling to length L + 1
        if mass == 0:
            return
        if len(prefix) == L + 1:
            law[prefix] = law.get(prefix, Fraction(0)) + mass
            return
        for a, pa in enumerate(p(prefix)):
            extend(prefix + (a,), mass * pa)

    def step(prefix, mass):
        if len(prefix) == L:
            extend(prefix, mass)  # bonus token from p
            return
        pr, qr = p(prefix), q(prefix)
        res = [max(x - y, Fraction(0)) for x, y in zip(pr, qr)]
        z = sum(res)
        res = [r / z for r in res] if z else pr
        reject = Fraction(0)
        for x in range(V):
            if qr[x] == 0:
                continue
            a = coin_accept(pr[x] / qr[x], bits, strict)
            step(prefix + (x,), mass * qr[x] * a)
            reject += qr[x] * (1 - a)
        for y in range(V):
            extend(prefix + (y,), mass * reject * res[y])

    step((), Fraction(1))
    return law


def target_law(inst):
    p, _ = _table(inst)
    V, L = inst.vocab_size, inst.block_length
    out = {}
    for y in itertools.product(range(V), repeat=L + 1):
        m = Fraction(1)
        for i in range(L + 1):
            m *= p(y[:i])[y[i]]
        out[y] = m
    return out


def tv_to_target(law, inst) -> Fraction:
    tgt = target_law(inst)
    keys = set(tgt) | set(law)
    return sum((abs(law.get(k, Fraction(0)) - tgt.get(k, Fraction(0))) for k in keys),
               Fraction(0)) / 2


def dyadic_instance():
    """V = 3, L = 2, prefix-dependent, every p/q dyadic: the drafted token 1 has target
    probability 0 at the root (p = (1/2, 0, 1/2), q = (1/4, 1/2, 1/4)), and below token 0 the
    draft's favourite token 2 has target probability 0 again."""
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({
        "vocab_size": 3, "block_length": 2,
        "target": {"": ["1/2", "0", "1/2"], "0": ["1/2", "1/2", "0"], "1": ["1/4", "1/4", "1/2"],
                   "2": ["1/4", "1/2", "1/4"], "0,0": ["1/2", "1/4", "1/4"],
                   "0,1": ["1/4", "1/4", "1/2"], "0,2": ["1/4", "1/2", "1/4"],
                   "1,0": ["1/2", "1/2", "0"], "1,1": ["1/4", "1/4", "1/2"],
                   "1,2": ["1/2", "1/4", "1/4"], "2,0": ["1/4", "1/4", "1/2"],
                   "2,1": ["1/2", "1/2", "0"], "2,2": ["1/4", "1/2", "1/4"]},
        "draft": {"": ["1/4", "1/2", "1/4"], "0": ["1/4", "1/4", "1/2"],
                  "1": ["1/2", "1/4", "1/4"], "2": ["1/4", "1/2", "1/4"]}}, exact=True)


def pow2(x: Fraction) -> str:
    """``x`` exactly: ``n/2^k`` when its denominator is a power of two (with its float value)."""
    d = x.denominator
    if x > 0 and d & (d - 1) == 0 and d > 10**6:
        return f"{x.numerator}/2^{d.bit_length() - 1} (about {float(x):.4g})"
    return str(x) if d <= 10**6 else f"{float(x):.6g}"


def coin_tv(bits: int, strict: bool) -> Fraction:
    inst = dyadic_instance()
    note(inst, "single", 1)
    return tv_to_target(coin_token_law(inst, bits, strict), inst)


DYADIC = ("dyadic_instance(): V = 3, L = 2, prefix-dependent, drafted tokens of target "
          "probability 0, every p and q dyadic (the engine's p/q is exact in floating point)")


def c_transformers_zero_coin() -> Finding:
    d = coin_tv(24, False)
    return Finding(f"TV of one iteration to the target {pow2(d)} (r <= p/q, r on the float32 grid "
                   f"k 2^-24: a ratio t < 1 is accepted with probability t + 2^-24, a "
                   f"zero-probability draft with 2^-24)", "confirmed" if d == 0 else "refuted",
                   DYADIC)


def c_sglang_zero_coin() -> Finding:
    d = coin_tv(24, False)
    return Finding(f"TV {pow2(d)} with coin <= p/q on the float32 grid", "confirmed" if d > 0
                   else "refuted", DYADIC)


def c_sglang_strict_coin() -> Finding:
    d = coin_tv(24, True)
    return Finding(f"TV {pow2(d)} with coin < p/q on the float32 grid (P(coin < t) = t for "
                   f"every ratio on the grid)", "confirmed" if d == 0 else "refuted", DYADIC)


def c_vllm_float64_coin() -> Finding:
    d32, d64 = coin_tv(24, False), coin_tv(53, False)
    verdict = "qualified" if 0 < d64 < d32 else ("confirmed" if d64 == 0 else "refuted")
    return Finding(f"p/q >= u: TV {pow2(d64)} with float64 uniforms against {pow2(d32)} with "
                   f"float32: smaller by a factor {pow2(d32 / d64)}, not zero (u = 0 still "
                   f"accepts p = 0)", verdict, DYADIC)


# ----------------------------------------------------------------------------- sample match


def sample_match_law(inst, candidates=None, consistent: bool = True):
    """Exact law of the L + 1 tokens (emitted block, then target sampling) of sample-match
    verification.

    Single path (``candidates`` None): the draft x ~ q; at position i the target samples
    y_i ~ p(.|x_{<i}); positions are accepted while y_i = x_i; the first mismatch emits y_i; if all
    L match, the bonus y_{L+1} ~ p(.|x). Multi-candidate (``candidates``: a list of K fixed token
    sequences of length L, a speculator's tree): ``consistent`` (fms-extras PR #17's
    candidate-consistent ground truth) samples one target token per tree node, shared by every
    candidate through it, and follows the candidates that keep matching; otherwise (fms-extras #12's
    naive form) every candidate k gets its own target samples y^k_i ~ p(.|x^k_{<i}), the candidate
    with the longest match wins (ties: the smallest index, this module's choice; #12 leaves the
    tie open), and its sample at its first mismatch (or its bonus) is emitted."""
    p, q = _table(inst)
    V, L = inst.vocab_size, inst.block_length
    law: dict = {}

    def extend(prefix, mass):
        if mass == 0:
            return
        if len(prefix) == L + 1:
            law[prefix] = law.get(prefix, Fraction(0)) + mass
            return
        for a, pa in enumerate(p(prefix)):
            extend(prefix + (a,), mass * pa)

    if candidates is None:
        def walk(prefix, mass):
            if len(prefix) == L:
                extend(prefix, mass)
                return
            pr, qr = p(prefix), q(prefix)
            for x in range(V):
                for y in range(V):
                    m = mass * qr[x] * pr[y]
                    if m == 0:
                        continue
                    if y == x:
                        walk(prefix + (x,), m)
                    else:
                        extend(prefix + (y,), m)
        walk((), Fraction(1))
        return law
    cands = [tuple(c) for c in candidates]
    if consistent:
        def node(prefix, mass):
            pr = p(prefix)
            kids = {c[len(prefix)] for c in cands if len(c) > len(prefix) and
                    c[:len(prefix)] == prefix}
            for y in range(V):
                if pr[y] == 0:
                    continue
                if y in kids and len(prefix) < L:
                    node(prefix + (y,), mass * pr[y])
                else:
                    extend(prefix + (y,), mass * pr[y])
        node((), Fraction(1))
        return law
    # per-candidate samples: enumerate every candidate's L + 1 target tokens. The outcome
    # reads of candidate k's samples only its match length and the token at its first mismatch
    # (or its bonus), so its sample sequences are summed by (length, token) first: the product
    # over candidates then runs over those groups (the same sums, by distributivity)
    per = []
    for c in cands:
        groups: dict = {}
        for y in itertools.product(range(V), repeat=L + 1):
            m = Fraction(1)
            for i in range(L + 1):
                m *= p(c[:i])[y[i]]
                if m == 0:
                    break
            if m:
                k = 0
                while k < L and y[k] == c[k]:
                    k += 1
                groups[(k, y[k])] = groups.get((k, y[k]), Fraction(0)) + m
        per.append(list(groups.items()))
    for combo in itertools.product(*per):
        mass = Fraction(1)
        for _, m in combo:
            mass *= m
        best = max(range(len(cands)), key=lambda j: (combo[j][0][0], -j))
        (k, y), c = combo[best][0], cands[best]
        extend(c[:k] + (y,), mass)
    return law


def sample_match_tau(inst) -> Fraction:
    """E[tau] of single-path sample match by walking its recursion (the mass that reaches depth
    t has matched t positions)."""
    p, q = _table(inst)
    V, L = inst.vocab_size, inst.block_length

    def walk(prefix, mass):
        if len(prefix) == L:
            return Fraction(0)
        pr, qr = p(prefix), q(prefix)
        out = Fraction(0)
        for x in range(V):
            m = mass * qr[x] * pr[x]
            if m:
                out += m + walk(prefix + (x,), m)
        return out

    return walk((), Fraction(1))


def _expected_matches(inst) -> Fraction:
    """E[tau] of single-path sample match: sum over t <= L of P(the first t tokens all match) =
    sum_{x^t} prod_i q(x_i|x^{i-1}) p(x_i|x^{i-1})."""
    p, q = _table(inst)
    V, L = inst.vocab_size, inst.block_length
    tot = Fraction(0)
    for t in range(1, L + 1):
        for x in itertools.product(range(V), repeat=t):
            m = Fraction(1)
            for i in range(t):
                m *= p(x[:i])[x[i]] * q(x[:i])[x[i]]
            tot += m
    return tot


def _sm_instances():
    from spectheory.inputs.random_instances import random_instance

    return [("toy", toy()), ("random(3,2,1,6)", random_instance(3, 2, 1, denominator=6)),
            ("dyadic_instance()", dyadic_instance())]


def c_sample_match_lossless() -> Finding:
    tvs = []
    for _, inst in _sm_instances():
        note(inst, "single", 1)
        tvs.append(tv_to_target(sample_match_law(inst), inst))
    return Finding("TV of one iteration to the target: " + ", ".join(map(str, tvs)),
                   "confirmed" if all(t == 0 for t in tvs) else "refuted",
                   "toy, random(3,2,1,6), dyadic_instance() (L = 2, prefix-dependent)")


def c_sample_match_biased() -> Finding:
    tvs = []
    for _, inst in _sm_instances():
        note(inst, "single", 1)
        tvs.append(tv_to_target(sample_match_law(inst), inst))
    biased = any(t > 0 for t in tvs)
    return Finding("TV of one iteration to the target: " + ", ".join(map(str, tvs)) +
                   " (the emitted tokens are the target's own samples)",
                   "confirmed" if biased else "refuted",
                   "toy, random(3,2,1,6), dyadic_instance() (L = 2, prefix-dependent)")


def c_sample_match_acceptance() -> Finding:
    vals, ok = [], []
    for name, inst in _sm_instances():
        note(inst, "single", 1)
        walked, closed = sample_match_tau(inst), _expected_matches(inst)
        tok = be(inst, "token") - 1
        ok.append(walked == closed)
        vals.append(f"{name}: {walked} (token verification {tok})")
    return Finding("E[tau] of the walk = sum_t sum_(x^t) prod_i p q exactly: " + "; ".join(vals),
                   "confirmed" if all(ok) else "refuted",
                   "toy, random(3,2,1,6), dyadic_instance() (L = 2, prefix-dependent)")


def fms_instance():
    """V = 3, L = 2, exact, prefix-dependent: p(0) = p(2) = 1/2 at the root (#12's 'a' and 'e'
    accepted with equal probability); candidates 00, 01, 02, 21 (#12's a b / a c / a d / e f on
    three tokens). Its draft rows are unused (the candidates are fixed)."""
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({
        "vocab_size": 3, "block_length": 2,
        "target": {"": ["1/2", "0", "1/2"], "0": ["1/3", "1/3", "1/3"], "1": ["1/2", "1/4", "1/4"],
                   "2": ["1/4", "1/2", "1/4"], "0,0": ["1/2", "1/4", "1/4"],
                   "0,1": ["1/3", "1/3", "1/3"], "0,2": ["1/4", "1/4", "1/2"],
                   "1,0": ["1/3", "1/3", "1/3"], "1,1": ["1/2", "1/4", "1/4"],
                   "1,2": ["1/4", "1/2", "1/4"], "2,0": ["1/2", "1/4", "1/4"],
                   "2,1": ["1/4", "1/4", "1/2"], "2,2": ["1/3", "1/3", "1/3"]},
        "draft": ["1/3", "1/3", "1/3"]}, exact=True)


FMS_CANDIDATES = [(0, 0), (0, 1), (0, 2), (2, 1)]


def c_fms_naive() -> Finding:
    inst = fms_instance()
    note(inst, "tree", len(FMS_CANDIDATES))
    law = sample_match_law(inst, FMS_CANDIDATES, consistent=False)
    d = tv_to_target(law, inst)
    first0 = sum((m for y, m in law.items() if y[0] == 0), Fraction(0))
    return Finding(f"TV {d}; the first token is 0 with probability {first0} instead of 1/2",
                   "confirmed" if d > 0 else "refuted",
                   "fms_instance() (V = 3, L = 2), candidates 00, 01, 02, 21; ties to the smaller "
                   "index")


def c_fms_consistent() -> Finding:
    inst = fms_instance()
    note(inst, "tree", len(FMS_CANDIDATES))
    d = tv_to_target(sample_match_law(inst, FMS_CANDIDATES, consistent=True), inst)
    return Finding(f"TV {d}", "confirmed" if d == 0 else "refuted",
                   "fms_instance() (V = 3, L = 2), candidates 00, 01, 02, 21")


def c_vllm_block_gate() -> Finding:
    t = toy()
    blk, tok = be(t, "block") - 1, be(t, "token") - 1
    return Finding(f"E[tau] at L = 2: token verification (what runs) {tok} < block verification "
                   f"(what was asked) {blk}; both lossless", "refuted" if tok < blk else
                   "confirmed", "toy (L = 2)")


# ----------------------------------------------------------------------------- rows

ENGINE = ("engine code: p = target probabilities, q = draft probabilities (spectheory's letters); "
          "one iteration; TV of the emitted block followed by target sampling")
COIN = ("engine code: target_prob = p(x), draft_prob = q(x) (spectheory's letters); r the "
        "uniform coin on torch.rand's CPU grid; one iteration; TV of the emitted block followed "
        "by target sampling")
SM = ("engine code: the target's sample y and the draft x at each position (p, q); tau = "
      "matched draft tokens of one iteration")
ONE_PATH = Hypotheses(("single",), K=(1,), L=(2,))
SM_PATH = Hypotheses(("single",), K=(1,), L=(2,),
                     notes="the target samples each position given the draft's prefix; at the "
                           "first mismatch its own sample is emitted, after L matches its next "
                           "sample")

ROWS = [
    Claim("vllm-40819-reference", "vLLM PR 40819", "pure-torch block-verification reference",
          "released code", "the pure-torch block-verification reference follows the target law "
          "like the kernel", ENGINE, Hypotheses(("single",), K=(1,), L=(3,)), "refuted",
          c_vllm_40819),
    Claim("gbv-reference-ties", "arXiv 2602.16961 (reference code)", "the reference code's tie "
          "rule", "released code", "the GBV reference code's tie rule keeps GBV lossless",
          "reference code: p target, q draft; one iteration, K i.i.d. paths",
          Hypotheses(("iid",), K=(2,), L=(1,), notes="p = q: every ratio ties"), "refuted",
          c_gbv_ref_tie),
    Claim("gbv-reference-leaf-order", "arXiv 2602.16961 (reference code)", "the reference "
          "traversal baseline", "released code", "the reference traversal baseline's first leaf "
          "(smallest node index) is a valid post-order",
          "reference code: p target, q draft; one iteration, K i.i.d. paths",
          Hypotheses(("iid",), K=(3,), L=(2,)), "refuted", c_gbv_ref_leaf),
    Claim("transformers-zero-coin", "transformers 5.24.0", "_speculative_sampling: "
          "is_accepted = r_i <= p_i / q_i, r_i = torch.rand_like (float32)", "engine behaviour",
          "speculative sampling as implemented keeps the target law (Leviathan et al.'s rule)",
          COIN, ONE_PATH, "refuted", c_transformers_zero_coin),
    Claim("sglang-35771-zero-coin", "SGLang #35771", "acceptance coin <= p/q with coins in "
          "[0, 1) (float32)", "engine behaviour", "a coin of exactly 0 accepts a draft whose "
          "target probability is 0, so the rule is lossy", COIN, ONE_PATH, "confirmed",
          c_sglang_zero_coin),
    Claim("sglang-35798-strict-coin", "SGLang PR #35798", "the fix: coin < p/q", "engine "
          "behaviour", "the strict comparison never accepts a zero-probability draft and keeps "
          "the target law", COIN, ONE_PATH, "confirmed", c_sglang_strict_coin),
    Claim("vllm-v1-ge-float64-coin", "vLLM V1 rejection_sampler.py", "accepted = draft_prob > 0 "
          "and target_prob / draft_prob >= uniform_prob, uniforms torch.rand float64 (chosen over "
          "float32 so that an exact 0 is negligible, pytorch #16706)", "engine behaviour",
          "float64 uniforms mitigate the exact-zero coin", COIN, ONE_PATH, "qualified",
          c_vllm_float64_coin),
    Claim("vllm-v1-block-gate", "vllm-ascend rejection_sampler.py",
          "vllm_ascend/sample/rejection_sampler.py, rejection_sample: using_block_verify = "
          "max_spec_len >= 3 and draft_probs is not None (\"When num_speculative_tokens>=3, "
          "using block verify\"); shorter drafts run the token kernel "
          "(rejection_random_sample_kernel). The gate is vllm-ascend's, not vLLM's: vLLM's V1 "
          "vllm/v1/sample/rejection_sampler.py (commit 7f6fc1c) has no block path; the id is "
          "kept (ids are stable)", "engine behaviour",
          "requesting block verification gives block verification's acceptance", ENGINE,
          Hypotheses(("single",), K=(1,), L=(2,), notes="max_spec_len = L = 2 (below the gate)"),
          "refuted", c_vllm_block_gate),
    Claim("mlx-swift-lm-459-acceptance", "mlx-swift-lm PR #459", "Problem", "engine behaviour",
          "sample-match verification accepts a position with probability sum_x p(x) q(x)", SM,
          SM_PATH, "confirmed", c_sample_match_acceptance),
    Claim("mlx-swift-lm-459-biased", "mlx-swift-lm PR #459", "Problem", "engine behaviour",
          "sample-match verification at temperature > 0 does not preserve the target "
          "distribution (surviving tokens biased toward the modes both models agree on)", SM,
          SM_PATH, "refuted", c_sample_match_biased),
    Claim("mlxcel-992-sample-match-exact", "mlxcel PR #992", "sampled verify", "engine "
          "behaviour", "sample-match verification is exact (lossless) with acceptance sum p q",
          SM, SM_PATH, "confirmed", c_sample_match_lossless),
    Claim("fms-extras-12-per-candidate", "fms-extras #12", "problem 2 (multi-candidate)",
          "engine behaviour", "with several candidates, sampling a ground truth per candidate and "
          "exact matching does not match the base model's output distribution",
          "candidates: a fixed tree of K token sequences (the speculator's); p target; one "
          "iteration", Hypotheses(("tree",), K=(4,), L=(2,),
                                  notes="ties between equally long matches: smallest index"),
          "confirmed", c_fms_naive),
    Claim("fms-extras-17-consistent", "fms-extras PR #17", "candidate-consistent ground-truth "
          "sampling", "engine behaviour", "sampling the ground truth consistently across "
          "candidates (one sample per tree node) restores the base model's distribution",
          "candidates: a fixed tree of K token sequences; p target; one iteration",
          Hypotheses(("tree",), K=(4,), L=(2,)), "confirmed", c_fms_consistent),
]


# ----------------------------------------------------------------------------- the bug kit's claims

#: Sources, kinds and hypotheses of the bug kit's engine claims (by name); a claim the kit adds
#: later is shown with the kit's own statement and check description.
KIT_META = {
    "eagle-329-not-lossless": ("EAGLE non-greedy path", "tree", "engine behaviour"),
    "vllm-56724-output-unchanged": ("draft sampling inside top-k / top-p", "single",
                                    "engine behaviour"),
    "vllm-56724-more-accepted": ("draft sampling inside top-k / top-p", "single",
                                 "engine behaviour"),
    "sglang-9877-acceptance": ("target-only tree sampling", "single", "engine behaviour"),
}


#: Readings the bug kit's rows share with their recomputation in the tests (by name).
KIT_READINGS = {
    name: "spectheory's top-k / top-p (vLLM V1's order; tokens tied at the top-k or top-p "
          "boundary kept or dropped together) on both the draft and the target rows; the "
          "request's parameters applied to the draft as to the target"
    for name in ("vllm-56724-output-unchanged", "vllm-56724-more-accepted")}


def _kit_check(name: str) -> Callable[[], Finding]:
    def check() -> Finding:
        from spectheory.testing.mutants import CLAIMS as KIT

        c = KIT[name]
        r = c.check()
        return Finding(r.summary, r.verdict, c.how)

    return check


def kit_rows() -> list[Claim]:
    """The bug kit's engine claims as ledger rows (loaded on first use: the kit loads torch)."""
    from spectheory.testing.mutants import CLAIMS as KIT

    out = []
    for name, c in KIT.items():
        where, drafting, kind = KIT_META.get(name, (c.issue, None, "engine behaviour"))
        out.append(Claim(name, f"{c.project} {c.issue}", where, kind, c.statement, ENGINE,
                         Hypotheses(kit=True, notes=f"as the bug kit states them: {c.how}"),
                         c.verdict, _kit_check(name), reading=KIT_READINGS.get(name, "")))
    return out


__all__ = ["ROWS", "kit_rows", "coin_accept", "coin_token_law", "sample_match_law",
           "dyadic_instance", "fms_instance", "OURS"]
