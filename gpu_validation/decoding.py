"""The speculative decoding loop over Hugging Face causal LMs, with KV caches and roll-back.

One iteration (Leviathan et al. 2023; Sun et al., arXiv 2403.10444, section 2):

1. **Draft**: K i.i.d. paths X_k = (X_k1..X_kL) from the draft model, the K paths being batch rows
   of one cache, recording the full draft conditionals q(.|c, X_k^{i}), i = 0..L-1  -> q [K, L, V].
2. **Target**: one forward of the target over (pending, X_k1..X_kL) for all K rows, giving the full
   target conditionals p(.|c, X_k^{i}), i = 0..L  -> p [K, L+1, V].
3. **Verify**: the law of a verifier from [`spectheory.verifiers`][spectheory.verifiers] (the SAME
   functions the exact engine uses; single-path ``f(drafts [B, L], q, p) -> Law`` or multi-path
   ``f(drafts [B, K, L], q, p) -> Law``, through
   [`VerifierSpec`][spectheory.registry.VerifierSpec]), sampled with
   [`sample_output`][spectheory.sampling.sample_output].
4. **Commit**: keep path k, tokens X_k1..X_ktau and the correction Y; both caches keep row k and are
   cropped back to the accepted prefix (roll-back); the tokens not yet in a cache are *pending* and
   are fed at the start of the next iteration.

Temperature, top-k and top-p are applied identically to draft and target logits
(`probs_from_logits`), so the loop is lossless for the processed target distribution.
Nothing here depends on the device: ``--device cpu`` and ``--device cuda`` run the same code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from spectheory.runtime.errors import SpectheoryError
from spectheory.law import Law
from spectheory.registry import VerifierSpec, get_verifier, registered
from spectheory.sampling import inverse_cdf, sample_output

from .checks import check_float, check_int


@dataclass(frozen=True)
class SamplingConfig:
    """Logit processing shared by draft and target: logits / T, then top-k, then top-p."""

    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1.0: off

    def __post_init__(self):
        if self.temperature == 0:
            raise SpectheoryError("temperature must be > 0 (greedy decoding has no sampling law)")
        check_float("temperature", self.temperature, 0, None, lo_open=True)
        check_int("top-k", self.top_k, 0)
        check_float("top-p", self.top_p, 0, 1, lo_open=True)


def probs_from_logits(logits: torch.Tensor, cfg: SamplingConfig,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """softmax(logits / T) restricted to the top-k tokens and to the smallest top-p nucleus
    (the most likely token is always kept), renormalised; computed in ``dtype``."""
    x = logits.to(dtype) / cfg.temperature
    if cfg.top_k and cfg.top_k < x.shape[-1]:
        kth = torch.topk(x, cfg.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if cfg.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly above each token
        drop_sorted = before >= cfg.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sync(device) -> None:
    """Wait for the device's queued work (CUDA), so that wall-clock timings are honest."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def draw_uniforms(shape, generator: torch.Generator | None, device) -> torch.Tensor:
    """Uniforms in [0, 1) (float64) drawn on the ``generator``'s own device (the CPU for None,
    torch's default generator) and moved to ``device``.

    torch refuses a generator on another device than the tensor it fills, so the draws of a CPU
    generator are made on the CPU and copied; the same seed gives the same uniforms, hence the same
    inverse-CDF draws, on ``--device cpu`` and ``--device cuda``."""
    where = generator.device if generator is not None else torch.device("cpu")
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=where)
    return u.to(device)


def crop_cache(cache, length: int) -> None:
    """Roll a DynamicCache back to its first ``length`` positions (all layers, all rows)."""
    n = cache.get_seq_length()
    if n > length:
        cache.crop(-(n - length))


def share_prefix_rows(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor):
    """One row per distinct prefix: paths that share the prefix X^i get the row of the first
    path through it, at every depth i (q [K, L, V] at i < L, p [K, L+1, V] at i <= L).

    The verifiers assume that a node's row does not depend on which path reached it. A batched
    forward pass computes the same prefix once per batch row, and the rows differ in the last
    bits (float32 batch noise); GBV ranks each drafted token from its own path's row, so equal
    tokens at one node could rank differently and the selection would change. Copying the first
    path's row makes the rows of a node identical. Returns new (q, p)."""
    K, L = drafts.shape
    same = (drafts.unsqueeze(1) == drafts.unsqueeze(0)).long().cumprod(-1)  # [K, K', L]
    q, p = q.clone(), p.clone()
    for i in range(L + 1):
        if i == 0:
            first = torch.zeros(K, dtype=torch.long, device=drafts.device)
        else:  # the smallest k' whose prefix X^i equals path k's
            first = same[:, :, i - 1].argmax(-1)
        p[:, i] = p[first, i]
        if i < L:
            q[:, i] = q[first, i]
    return q, p


@dataclass
class Proposal:
    """One drafted batch: K paths and the full conditionals along them (rows of the caches)."""

    drafts: torch.Tensor  # [K, L] long
    q: torch.Tensor  # [K, L, V]
    p: torch.Tensor  # [K, L+1, V]
    base_len: int  # target cache length before the iteration
    n_pending: int  # target tokens pending before the iteration
    draft_base: int = 0  # draft cache length before the iteration
    draft_pending: int = 1  # draft tokens pending before the iteration
    draft_seconds: float = 0.0
    target_seconds: float = 0.0

    @property
    def K(self) -> int:
        return self.drafts.shape[0]

    @property
    def L(self) -> int:
        return self.drafts.shape[1]

    def prefix(self, K: int, L: int) -> "Proposal":
        """The first K paths truncated to L tokens: itself a draft of K i.i.d. paths of length L."""
        return Proposal(self.drafts[:K, :L], self.q[:K, :L], self.p[:K, : L + 1],
                        self.base_len, self.n_pending, self.draft_base, self.draft_pending)


@dataclass
class _ModelState:
    model: object
    cache: object = None
    pending: list = field(default_factory=list)

    def length(self) -> int:
        return 0 if self.cache is None else self.cache.get_seq_length()


class SpeculativeDecoder:
    """Draft/target pair with KV caches. ``start(prompt)``, then ``propose`` / ``commit``.

    Invariant between iterations: each cache holds the committed tokens except its ``pending`` ones
    (at least the last committed token), which the next forward feeds first.
    """

    def __init__(self, draft_model, target_model, sampling: SamplingConfig = SamplingConfig(),
                 prob_dtype: torch.dtype = torch.float64, device: str = "cpu"):
        vd = draft_model.get_output_embeddings().weight.shape[0]
        vt = target_model.get_output_embeddings().weight.shape[0]
        if vd != vt:
            raise SpectheoryError(f"vocabulary mismatch: draft {vd} tokens, target {vt}")
        self.vocab_size = int(vt)
        self.draft = _ModelState(draft_model)
        self.target = _ModelState(target_model)
        self.sampling = sampling
        self.prob_dtype = prob_dtype
        self.device = device
        self.tokens: list[int] = []

    # -- model calls ---------------------------------------------------------------------------
    def _forward(self, state: _ModelState, ids: torch.Tensor, keep: int):
        from transformers import DynamicCache

        if state.cache is None:
            state.cache = DynamicCache()
        out = state.model(input_ids=ids.to(self.device), past_key_values=state.cache,
                          use_cache=True, logits_to_keep=keep)
        state.cache = out.past_key_values
        return out.logits

    def _probs(self, logits):
        return probs_from_logits(logits, self.sampling, self.prob_dtype)

    @torch.no_grad()
    def start(self, prompt_ids) -> None:
        """Prefill both caches with the prompt except its last token (which becomes pending)."""
        ids = [int(t) for t in prompt_ids]
        if not ids:
            raise SpectheoryError("empty prompt")
        if max(ids) >= self.vocab_size or min(ids) < 0:
            raise SpectheoryError(f"prompt token out of range for vocabulary {self.vocab_size}")
        self.tokens = list(ids)
        for st in (self.draft, self.target):
            st.cache = None
            st.pending = [ids[-1]]
            if len(ids) > 1:
                self._forward(st, torch.tensor([ids[:-1]]), keep=1)

    @torch.no_grad()
    def propose(self, K: int, L: int, generator: torch.Generator | None = None,
                forced: torch.Tensor | None = None) -> Proposal:
        """Draft K i.i.d. paths of L tokens (or the ``forced`` [K, L] tokens, for enumeration) and
        run the target over them. Leaves both caches with K rows; call `commit` next."""
        if K < 1 or L < 1:
            raise SpectheoryError("K and L must be >= 1")
        base = self.target.length()
        if self.draft.length() + len(self.draft.pending) != base + len(self.target.pending):
            # with two causal LMs of the library the lengths agree by construction: a model
            # whose forward keeps no key-value cache of the prompt (an encoder's LM head, a
            # foreign architecture) is the input at fault, not a state of this decoder
            raise SpectheoryError(
                f"the draft's and the target's key-value caches hold {self.draft.length()} and "
                f"{base} tokens after the same prompt: the models do not keep a causal "
                "key-value cache the decoder can use (check their config's model_type)")
        d, t = self.draft, self.target
        d_base, d_pend = d.length(), len(d.pending)
        for st in (d, t):
            if st.cache is not None:
                st.cache.batch_repeat_interleave(K)
        sync(self.device)
        t0 = time.perf_counter()
        ids = torch.tensor([d.pending] * K)
        drafts, qs = [], []
        for i in range(L):
            q_i = self._probs(self._forward(d, ids, keep=1)[:, -1])  # [K, V]
            qs.append(q_i)
            if forced is not None:
                x = forced[:, i].to(q_i.device).long()
            else:
                u = draw_uniforms(K, generator, q_i.device)
                x = inverse_cdf(q_i, u)
            drafts.append(x)
            if i < L - 1:
                ids = x.view(K, 1)
        sync(self.device)
        t1 = time.perf_counter()
        X = torch.stack(drafts, 1)  # [K, L]
        n_pend = len(t.pending)
        tids = torch.cat([torch.tensor([t.pending] * K, device=X.device), X], 1)
        logits = self._forward(t, tids, keep=L + 1)  # [K, L+1, V]
        p = self._probs(logits)
        sync(self.device)
        t2 = time.perf_counter()
        q, p = share_prefix_rows(X, torch.stack(qs, 1), p)
        return Proposal(X, q, p, base, n_pend, d_base, d_pend, t1 - t0, t2 - t1)

    def commit(self, prop: Proposal, k: int, tau: int, y: int) -> list[int]:
        """Keep path k, its first ``tau`` tokens and the correction ``y``; roll both caches back.

        Returns the newly generated tokens (X_k1..X_ktau, y)."""
        L = prop.L
        if not (0 <= k < prop.K and 0 <= tau <= L):
            raise ValueError("commit: k or tau out of range")
        x = [int(v) for v in prop.drafts[k, :tau].tolist()]
        new = x + [int(y)]
        idx = torch.tensor([k], device=prop.drafts.device)
        t, d = self.target, self.draft
        t.cache.batch_select_indices(idx)
        crop_cache(t.cache, prop.base_len + prop.n_pending + tau)
        t.pending = [int(y)]
        # the draft cache holds base + pending + X_1..X_{L-1}
        d.cache.batch_select_indices(idx)
        keep = min(tau, L - 1)
        crop_cache(d.cache, prop.draft_base + prop.draft_pending + keep)
        d.pending = x[keep:] + [int(y)]
        self.tokens.extend(new)
        return new


# -- verifiers on a proposal -------------------------------------------------------------------
def verifier_registry() -> dict:
    """name -> [`VerifierSpec`][spectheory.registry.VerifierSpec] of every lossless verifier (the
    one registry of [`spectheory.registry`][spectheory.registry]). Never a second implementation."""
    return registered(lossless=True)


def resolve_verifier(name, allow_lossy: bool = False, iid_drafting: bool = True
                     ) -> VerifierSpec:
    """The spec of a registered name, ``module:function``, entry point, spec or function
    ([`get_verifier`][spectheory.registry.get_verifier]).

    Refused with a one-line error: a known-lossy control unless ``allow_lossy``; with
    ``iid_drafting`` (the loop drafts K i.i.d. paths) a K-path verifier that is lossless only
    under another drafting scheme (without replacement; SpecHub's hub drafting)."""
    spec = get_verifier(name)
    if not spec.lossless and not allow_lossy:
        raise SpectheoryError(f"verifier {spec.name!r} is a known-lossy control; it is not run as "
                              f"a real verifier here")
    if iid_drafting and not spec.single_path and spec.drafting not in ("iid", "any") and \
            spec.lossless:
        raise SpectheoryError(f"verifier {spec.name!r} is lossless under {spec.drafting} "
                              "drafting; this loop drafts i.i.d. paths")
    return spec


def law_on(spec: VerifierSpec, prop: Proposal, path: int = 0) -> Law:
    """Evaluate a verifier on a proposal, in the K-path form [1, K, L+1]: a single-path verifier
    on path ``path`` alone (K = 1), a multi-path one on all K paths."""
    if spec.single_path:
        sl = slice(path, path + 1)
        return spec.law(prop.drafts[None, sl], prop.q[None, sl], prop.p[None, sl])
    return spec.law(prop.drafts[None], prop.q[None], prop.p[None])


def sample_on(law: Law, generator=None, uniforms=None, path: int = 0):
    """(k, tau, y) as ints from a law from `law_on` (``path``: the offset of a single-path
    verifier's path); the uniforms come from `draw_uniforms` unless given."""
    if uniforms is None:
        uniforms = draw_uniforms((law.stop.shape[0], 2), generator, law.stop.device)
    k, tau, y = sample_output(law, generator, uniforms)
    return int(k[0]) + path, int(tau[0]), int(y[0])


def expected_tau(law: Law) -> torch.Tensor:
    """E[tau | drafts] per batch row of a law in the K-path form [B, K, L+1]."""
    stop = law.stop
    L1 = stop.shape[-1]
    i = torch.arange(L1, dtype=stop.dtype, device=stop.device)
    return (stop * i).sum(-1).sum(-1)


def proposal_bytes(K: int, L: int, V: int, copies: int = 3) -> int:
    """Estimated bytes of one drafted batch and the laws evaluated on it: ``copies`` float64
    tensors of q [K, L, V] plus p [K, L+1, V] (the proposal, a law's correction, temporaries)."""
    return copies * K * (2 * L + 1) * V * 8


def check_memory(K: int, L: int, V: int, limit_gib: float, what: str = "K and L") -> None:
    """Refuse a batch whose `proposal_bytes` exceed ``limit_gib`` (before any work)."""
    need = proposal_bytes(K, L, V)
    if need > limit_gib * 2 ** 30:
        raise SpectheoryError(
            f"{K} drafted path(s) of {L} tokens at vocabulary {V} need about {need / 2 ** 30:.1f}"
            f" GiB (limit {limit_gib:g} GiB); lower {what} or raise --memory-limit")


@torch.no_grad()
def step(decoder: SpeculativeDecoder, spec: VerifierSpec, K: int, L: int,
         generator: torch.Generator | None = None) -> tuple[list[int], int]:
    """One iteration of speculative decoding: propose -> law -> sample -> commit.

    Returns the new tokens (X_k1..X_ktau, Y) and tau."""
    prop = decoder.propose(K, L, generator)          # K i.i.d. draft paths, q and p along them
    law = law_on(spec, prop)                          # the verifier's law of (path, tau, Y)
    k, tau, y = sample_on(law, generator)             # one outcome
    return decoder.commit(prop, k, tau, y), tau       # keep path k, roll the caches back


@torch.no_grad()
def generate(decoder: SpeculativeDecoder, prompt_ids, max_new_tokens: int, verifier="block",
             K: int = 1, L: int = 4, generator: torch.Generator | None = None,
             allow_lossy: bool = False):
    """Plain speculative generation with one verifier (a name, ``module:function`` or spec);
    returns (new tokens, per-step taus)."""
    spec = resolve_verifier(verifier, allow_lossy)
    if spec.single_path and K != 1:
        raise SpectheoryError(f"{spec.name} is a single-path verifier: use K = 1")
    decoder.start(prompt_ids)
    out, taus = [], []
    while len(out) < max_new_tokens:
        new, tau = step(decoder, spec, K, L, generator)
        out.extend(new)
        taus.append(tau)
    return out[:max_new_tokens], taus


__all__ = ["SamplingConfig", "probs_from_logits", "SpeculativeDecoder", "Proposal", "crop_cache",
           "sync", "draw_uniforms", "verifier_registry", "resolve_verifier", "share_prefix_rows",
           "law_on", "sample_on", "expected_tau", "proposal_bytes", "check_memory", "step",
           "generate"]
