"""Sampling parameters through an engine's own processing path, for the layout presets.

[`check_sampler`][spectheory.testing.checks.sampler.check_sampler] with ``sampling=`` hands a
sampler the **raw** target rows and computes the exact law against the rows processed by
`spectheory.inputs.processing`. A serving engine processes them itself, each in its own way, and
a preset built with ``sampling=`` (``engine_sampler(fn, layout, sampling=...)``,
`spectheory.testing.engines.layouts`) runs that way before it calls the engine function:

* ``"vllm-v1"``: ``RejectionSampler.forward`` of vllm/v1/sample/rejection_sampler.py. The target
  logits at the draft positions go through the engine module's own
  ``apply_sampling_constraints`` (temperature, top-k, top-p), found next to ``fn`` in its module,
  so the released function runs when ``fn`` is the released ``rejection_sample``.
  ``sampling_metadata`` carries ``temperature``, ``top_k`` and ``top_p`` tensors,
  ``all_greedy`` / ``all_random``, and the module's ``GREEDY_TEMPERATURE`` for greedy requests.
  The bonus row is processed separately by the same function (the ordinary ``Sampler``'s
  temperature and top-k/top-p) and drawn by the kit, by argmax when greedy. **min_p is
  dropped**: with speculative decoding vLLM V1 loads no min-p processor
  (vllm/v1/sample/logits_processor/__init__.py warns "min_p and logit_bias parameters won't
  work with speculative decoding"); the preset does the same, and a check under ``min_p`` fails
  because the engine's output does not follow the processed target.
* ``"sglang"``: ``verify`` of sglang/srt/speculative/eagle_utils.py: ``softmax(logits / T)``, then
  ``top_k_renorm_prob`` and ``top_p_renorm_prob``, ported
  ([`sglang_renorm`][spectheory.testing.engines.engine_sampling.sglang_renorm]) from
  sglang/kernels/ops/sampling/renorm_triton.py (the released functions refuse CPU tensors).
  Greedy is SGLang's ``top_k = 1`` at temperature 1 (sglang/srt/sampling/sampling_params.py),
  which keeps every token tied at the maximum. **min_p is not applied** on the verify path, so a
  check under ``min_p`` fails.
* ``"transformers"``: ``_assisted_decoding`` of transformers/generation/utils.py. The target
  logits of every position go through a ``LogitsProcessorList`` of the library's own warpers
  built from a ``GenerationConfig``
  ([`transformers_processors`][spectheory.testing.engines.engine_sampling.transformers_processors]:
  ``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``, ``MinPLogitsWarper``,
  in ``_get_logits_processor``'s order). Greedy (``do_sample=False``) does not call
  ``_speculative_sampling``: the library matches the drafts against the argmax inline, and the
  preset runs a port of those lines
  ([`hf_greedy_match`][spectheory.testing.engines.adapters.hf_greedy_match]).
* ``"trtllm"``, ``"llama.cpp"``: the target probabilities processed by
  `spectheory.inputs.processing` (vLLM's order) before the call, and the token after the drafts
  drawn from the processed row. Both engines hand their rejection step rows their own samplers
  already processed (TensorRT-LLM's ``py_target_probs``, llama.cpp's
  ``common_sampler_get_candidates``).
* ``"vllm-mrv2"``: MRV2 processes the target logits in its stateful GPU sampler
  (``Sampler.apply_sampling_params``, vllm/v1/worker/gpu/sample/sampler.py: temperature, min-p,
  top-k, top-p, vLLM's order), which the kit does not run: the preset hands the kernel the target
  rows processed by `spectheory.inputs.processing` in that order as a **stand-in** for it, the
  request's ``temperature`` (0 for greedy) and the draft logits stored before temperature
  (T log q, which the kernel divides by T). The kernel and its greedy path are the engine's; the
  target processing is the kit's.

Parameters that read the request's history (penalties, ``min_tokens``, ``logit_bias``,
``no_repeat_ngram_size``, ``grammar``): the upstream paths (``"trtllm"``, ``"llama.cpp"``,
``"vllm-mrv2"``) process row i after the drafts before it, as the check's reference does
(`spectheory.inputs.processing.process_rows_along`); the ``"vllm-v1"``, ``"sglang"`` and
``"transformers"`` presets run the engines' temperature, top-k and top-p path only and refuse
them in one line (`STATELESS_PATHS`): a verdict there would be on a path the engine does not take.

The draft rows are handed as drafted (the kit samples the drafts from them), so a sampler's q is
the q its drafts follow. Ties: the kit's reference keeps tokens tied at a top-k or top-p boundary
together and sends greedy to the lowest id; vLLM and transformers decide a top-p boundary tie by
``torch.sort`` position, SGLang's ``top_k = 1`` keeps every token tied at the maximum. On rows with
such ties the engines' processed rows can differ from the reference by design: check them on rows
without ties at the boundaries
([`boundary_ties`][spectheory.testing.engines.engine_sampling.boundary_ties] lists the rows that
have one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...inputs.processing import SamplingParams, parse_sampling, process_rows, process_rows_along
from ...runtime.errors import OptionError
from ...runtime.limits import shown as _repr_cut

__all__ = ["EngineProcessing", "engine_processing", "engine_globals", "WRAPPER_RULE",
           "sglang_renorm", "transformers_processors", "boundary_ties", "DROPPED"]

#: What each engine's speculative path leaves out of the kit's parameters (a check under them
#: then fails: the engine's output does not follow the processed target).
DROPPED = {"vllm-v1": ("min_p",), "sglang": ("min_p",)}

#: How to write a wrapper around an engine function so that the kit finds the engine's module.
WRAPPER_RULE = ("wrap it with functools.wraps(engine_function) or functools.partial so that "
                "the engine's module stays reachable")


def _unwrap_chain(fn) -> list:
    """``fn`` and every function it wraps, through ``functools.partial`` (``.func``) and
    ``functools.wraps`` (``__wrapped__``), outermost first (a cycle stops the walk)."""
    import functools

    chain, seen, f = [], set(), fn
    while f is not None and id(f) not in seen:
        seen.add(id(f))
        chain.append(f)
        f = f.func if isinstance(f, functools.partial) else getattr(f, "__wrapped__", None)
    return chain


def engine_globals(fn, name: str) -> dict | None:
    """The module namespace of the engine function behind ``fn`` that defines ``name``: the
    first function of ``fn``'s wrapper chain (``functools.partial``, ``functools.wraps``) whose
    ``__globals__`` hold ``name``; None when none does."""
    if not isinstance(name, str):
        raise OptionError(f"engine_globals: name = {_repr_cut(name, 40)} must be a string (a global's "
                          "name)")
    for f in _unwrap_chain(fn):
        g = getattr(f, "__globals__", None)
        if g is not None and name in g:
            return g
    return None


def _get(kw: dict, dotted: str):
    obj = kw
    for part in dotted.split("."):
        obj = obj[part]
    return obj


def _put(kw: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    obj = kw
    for part in parts[:-1]:
        obj = obj[part]
    obj[parts[-1]] = value


def sglang_renorm(probs, top_k: int | None, top_p: float):
    """SGLang's ``top_k_renorm_prob`` then ``top_p_renorm_prob`` on float32 rows ``probs [n, V]``
    (ported from sglang/kernels/ops/sampling/renorm_triton.py): top-k keeps every probability
    >= the k-th largest (sorted descending); top-p sorts ascending, takes the first index whose
    cumulative sum reaches 1 - top_p (``searchsorted(..., right=False)``) as the pivot and keeps
    every probability >= it; each step divides the kept values by their float32 sum."""
    V = probs.shape[-1]

    def keep_from(pivot):
        kept = torch.where(probs >= pivot.unsqueeze(-1), probs, torch.zeros_like(probs))
        return kept / kept.sum(-1, keepdim=True)

    if top_k is not None and top_k < V:
        srt = torch.sort(probs, dim=-1, descending=True).values
        probs = keep_from(srt[:, max(top_k - 1, 0)])
    if top_p < 1:
        srt = torch.sort(probs, dim=-1).values
        cdf = torch.cumsum(srt, dim=-1)
        bound = torch.full((probs.shape[0], 1), 1.0 - float(top_p), dtype=probs.dtype)
        cut = torch.searchsorted(cdf, bound, right=False).squeeze(1).clamp(max=V - 1)
        probs = keep_from(srt.gather(1, cut.unsqueeze(1)).squeeze(1))
    return probs


def transformers_processors(sp: SamplingParams):
    """The ``LogitsProcessorList`` transformers builds for ``do_sample=True`` from a
    ``GenerationConfig`` with these parameters, with the library's own warper classes in
    ``GenerationMixin._get_logits_processor``'s order (temperature, top-k, top-p, min-p;
    transformers/generation/utils.py)."""
    from transformers import GenerationConfig  # optional dependency
    from transformers.generation.logits_process import (LogitsProcessorList, MinPLogitsWarper,
                                                        TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    cfg = GenerationConfig(do_sample=True, temperature=float(sp.temperature),
                           top_k=sp.top_k or 0, top_p=float(sp.top_p),
                           min_p=float(sp.min_p) if sp.min_p else None)
    procs = []
    if cfg.temperature is not None and cfg.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(cfg.temperature))
    if cfg.top_k is not None and cfg.top_k != 0:
        procs.append(TopKLogitsWarper(top_k=cfg.top_k, min_tokens_to_keep=1))
    if cfg.top_p is not None and cfg.top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p=cfg.top_p, min_tokens_to_keep=1))
    if cfg.min_p is not None:
        procs.append(MinPLogitsWarper(min_p=cfg.min_p, min_tokens_to_keep=1))
    return LogitsProcessorList(procs)


def boundary_ties(p, sampling, tol: float = 1e-6) -> list[tuple[int, ...]]:
    """Indices of the rows of ``p [..., V]`` where the engines may process differently from the
    kit's reference by tie order alone: a tie (within ``tol``) at the maximum under greedy or
    ``top_k = 1``, at the k-th largest value under top-k, or straddling the top-p boundary (a
    token tied with the last kept one dropped by the reference's rule if the tie were split).
    Refused in one line: ``p`` not an array of at least one dimension of finite non-negative
    numbers with V >= 1, ``tol`` not a finite number >= 0."""
    from ...runtime.limits import check_real, shown

    tol = check_real(tol, "boundary_ties: tol =", 0.0, float("inf"), OptionError,
                     "a finite number >= 0")
    try:
        x = torch.as_tensor(p, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise OptionError(f"boundary_ties: p = {shown(p)} is not an array of probabilities "
                          f"[..., V]") from None
    if x.dim() < 1 or x.shape[-1] < 1 or x.numel() == 0:
        raise OptionError(f"boundary_ties: p has shape {list(x.shape)}; rows [..., V] with "
                          f"V >= 1 and at least one row")
    if not bool((torch.isfinite(x) & (x >= 0)).all()):
        raise OptionError("boundary_ties: p has an entry that is not a finite number >= 0")
    sp = parse_sampling(sampling)
    if sp is None:
        return []
    rows = x.reshape(-1, x.shape[-1])
    if not sp.greedy and sp.temperature != 1:
        rows = process_rows(rows, SamplingParams(temperature=sp.temperature))
    out = []
    for i, r in enumerate(rows):
        s = torch.sort(r, descending=True).values
        bad = False
        if sp.greedy or sp.top_k == 1:
            bad = s.shape[0] > 1 and float(s[0] - s[1]) <= tol and float(s[0]) > 0
        elif sp.top_k is not None and sp.top_k < s.shape[0]:
            k = sp.top_k
            bad = float(s[k - 1] - s[k]) <= tol and float(s[k - 1]) > 0
        if not bad and not sp.greedy and sp.top_p < 1:
            c = torch.cumsum(s, 0)
            n = int((c < float(sp.top_p) * float(c[-1]) - tol).sum()) + 1  # kept by mass
            n = min(n, s.shape[0])
            bad = n < s.shape[0] and float(s[n - 1] - s[n]) <= tol and float(s[n]) > 0
        if bad:
            out.append(tuple(_multi_index(i, x.shape[:-1])))
    return out


def _multi_index(i: int, shape) -> list[int]:
    """The multi-index of flat index ``i`` in ``shape``."""
    idx = []
    for n in reversed(list(shape)):
        idx.append(i % n)
        i //= n
    return list(reversed(idx))


@dataclass
class EngineProcessing:
    """One engine's processing of the kit's sampling parameters (see the module docstring);
    built by [`engine_processing`][spectheory.testing.engines.engine_sampling.engine_processing]."""

    engine: str
    params: SamplingParams

    @property
    def greedy(self) -> bool:
        return self.params.greedy

    @property
    def dropped(self) -> tuple:
        """The parameters set here that the engine's speculative path does not apply."""
        sp = self.params
        return tuple(k for k in DROPPED.get(self.engine, ())
                     if {"min_p": sp.min_p != 0}.get(k, False))

    def apply(self, fn, layout, kw: dict, values: dict, drafts, p, generator):
        """Edit the engine's keyword arguments ``kw`` (built by the layout from the raw rows
        ``p [B, L+1, V]``) as the engine's own path processes them; returns the function to
        call (``fn``, or the port of an inline path)."""
        return getattr(self, "_" + self.engine.replace("-", "_").replace(".", "_"))(
            fn, layout, kw, values, drafts, p, generator)

    # ------------------------------------------------------------------ vLLM V1
    def _vllm_v1(self, fn, layout, kw, values, drafts, p, generator):
        sp = self.params
        roles = layout.roles
        B, L = drafts.shape
        meta = roles["temperature"].rsplit(".", 1)[0] if "temperature" in roles \
            else "sampling_metadata"
        g = engine_globals(fn, "apply_sampling_constraints")
        if g is None:
            raise OptionError(f"vLLM V1 sampling: no apply_sampling_constraints in the module of "
                              f"{getattr(fn, '__name__', fn)!r} nor of a function it wraps; "
                              f"{WRAPPER_RULE}")
        apply = g["apply_sampling_constraints"]
        greedy_t = float(g.get("GREEDY_TEMPERATURE", 0))
        bonus_logits = torch.log(p[:, L].to(torch.float64)).to(torch.float32)
        dev = bonus_logits.device
        if sp.greedy:
            _put(kw, f"{meta}.all_greedy", True)
            _put(kw, f"{meta}.all_random", False)
            _put(kw, f"{meta}.temperature", torch.full((B,), greedy_t, dtype=torch.float32,
                                                       device=dev))
            bonus = bonus_logits.argmax(-1)
        else:
            _put(kw, f"{meta}.all_greedy", False)
            _put(kw, f"{meta}.all_random", True)
            _put(kw, f"{meta}.temperature", torch.full((B,), float(sp.temperature),
                                                       dtype=torch.float32, device=dev))
            V = bonus_logits.shape[-1]  # vLLM's input batch holds min(k, V) in int32 (a k past
            # the vocabulary keeps every token): 2^31 and over did not fit the tensor
            _put(kw, f"{meta}.top_k", None if sp.top_k is None else
                 torch.full((B,), min(int(sp.top_k), V), dtype=torch.int32, device=dev))
            _put(kw, f"{meta}.top_p", None if sp.top_p == 1 else
                 torch.full((B,), float(sp.top_p), dtype=torch.float32, device=dev))
            from types import SimpleNamespace

            md = SimpleNamespace(**{k: v for k, v in _get(kw, meta).items()})
            tname = roles["target"]
            cu = _get(kw, roles["counts"])
            _put(kw, tname, apply(_get(kw, tname).clone(), cu, md))
            cu_b = torch.arange(1, B + 1, dtype=cu.dtype, device=dev)
            processed = apply(bonus_logits.clone(), cu_b, md)
            probs = torch.softmax(processed.to(torch.float64), dim=-1)
            bonus = torch.multinomial(probs, 1, generator=generator)[:, 0]
        if "bonus" in roles:
            it = _get(kw, roles["bonus"]).dtype
            _put(kw, roles["bonus"], bonus.to(it).reshape(B, 1).contiguous())
        return fn

    # ------------------------------------------------------------------ SGLang
    def _sglang(self, fn, layout, kw, values, drafts, p, generator):
        sp = self.params
        name = layout.roles["target"]
        rows = _get(kw, name)
        shape, dt = rows.shape, rows.dtype
        T, k = (1.0, 1) if sp.greedy else (float(sp.temperature), sp.top_k)
        logits = torch.log(p.to(torch.float64)).to(torch.float32).reshape(-1, shape[-1])
        probs = torch.softmax(logits / T, dim=-1)
        probs = sglang_renorm(probs, k, 1.0 if sp.greedy else float(sp.top_p))
        _put(kw, name, probs.to(dt).reshape(shape).contiguous())
        return fn

    # ------------------------------------------------------------------ transformers
    def _transformers(self, fn, layout, kw, values, drafts, p, generator):
        from .adapters import hf_greedy_match

        if self.greedy:
            return hf_greedy_match
        name = layout.roles["target"]
        logits = _get(kw, name)
        V = logits.shape[-1]
        procs = transformers_processors(self.params)
        flat = logits.reshape(-1, V).clone()
        ids = torch.zeros(flat.shape[0], 1, dtype=torch.long, device=flat.device)
        _put(kw, name, procs(ids, flat).reshape(logits.shape).contiguous())
        return fn

    # ------------------------------------------------------------------ rows processed upstream
    def _processed_rows(self, layout, kw, p, drafts, generator):
        roles = layout.roles
        name = roles["target"]
        rows = _get(kw, name)
        B, S, V = p.shape
        proc = _processed_along(p, drafts, self.params)
        if "bonus" in roles:  # the caller's token after the drafts, from the processed row
            it = _get(kw, roles["bonus"]).dtype
            bonus = torch.multinomial(proc[:, S - 1], 1, generator=generator)
            _put(kw, roles["bonus"], bonus.to(it).reshape(B, 1).contiguous())
        proc = proc if layout.target_bonus else proc[:, :S - 1]
        if layout.target_inputs == "logits":
            proc = torch.log(proc)
        _put(kw, name, proc.to(rows.dtype).reshape(rows.shape).contiguous())

    def _trtllm(self, fn, layout, kw, values, drafts, p, generator):
        self._processed_rows(layout, kw, p, drafts, generator)
        return fn

    def _llama_cpp(self, fn, layout, kw, values, drafts, p, generator):
        self._processed_rows(layout, kw, p, drafts, generator)
        return fn

    def _vllm_mrv2(self, fn, layout, kw, values, drafts, p, generator):
        sp = self.params
        roles = layout.roles
        B = p.shape[0]
        T = 0.0 if sp.greedy else float(sp.temperature)
        tname, dname = roles["target"], roles["draft"]
        rows = _get(kw, tname)
        proc = torch.log(_processed_along(p, drafts, sp))
        _put(kw, tname, proc.to(rows.dtype).reshape(rows.shape).contiguous())
        d = _get(kw, dname)
        if T > 0:
            _put(kw, dname, (d * T).contiguous())
        t = _get(kw, roles["temperature"])
        _put(kw, roles["temperature"], torch.full((B,), T, dtype=t.dtype, device=t.device))
        return fn


def _processed_along(p, drafts, sp: SamplingParams):
    """The rows ``p [B, L+1, V]`` processed by ``sp`` as the check's reference processes them:
    row i after the history ``drafts[:, :i]`` (penalties, masks and biases read it; a
    stateless ``sp`` reads none)."""
    p = p.to(torch.float64)
    if not sp.stateful:
        return process_rows(p, sp)
    return process_rows_along(p, torch.as_tensor(drafts).to(torch.long), sp)


#: The engines whose preset runs the engine's own stateless path (temperature, top-k, top-p),
#: not the parameters that read a request's history.
STATELESS_PATHS = ("vllm-v1", "sglang", "transformers")


def engine_processing(layout, sampling) -> EngineProcessing | None:
    """The processing of ``sampling`` (as ``check_sampler`` accepts it) along ``layout``'s
    ``processing`` path; None for no parameters. Refused in one line where the layout names no
    path, or the path cannot be run (vLLM MRV2), or ``layout`` is not a layout (a preset's name
    is read by `get_layout`)."""
    if not hasattr(layout, "processing") or not hasattr(layout, "name"):
        raise OptionError(f"engine_processing: layout must be a Layout (get_layout({_repr_cut(layout, 30)}) "
                          f"for a preset by name), not {type(layout).__name__}")
    sp = parse_sampling(sampling)
    if sp is None:
        return None
    engine = layout.processing
    if engine is None:
        raise OptionError(f"layout {layout.name!r} names no processing path for sampling "
                          f"parameters (processing=None); set one with layout.replace("
                          f"processing=...)")
    if engine in STATELESS_PATHS and sp.stateful:
        raise OptionError(f"layout {layout.name!r}: the preset runs {engine}'s temperature, "
                          f"top-k and top-p path, not {', '.join(sp.stateful_names)} "
                          f"(parameters that read the request's history); a verdict would be on a path the engine "
                          f"does not take. Check the engine's whole step (check_step), or a "
                          f"layout whose rows are processed upstream (trtllm, llama.cpp, "
                          f"vllm-mrv2)")
    if engine == "transformers" and sp.order != "transformers" and sp.top_p < 1 and sp.min_p:
        raise OptionError("layout 'transformers' applies top-p before min-p: pass "
                          "order=transformers in sampling= (and to check_sampler)")
    return EngineProcessing(engine, sp)
