"""Toy (draft, target) families, each a function of a seed and a few parameters.

Every family returns a `spectheory.inputs.instances.Instance` (target tables for prefixes of length <= L,
draft tables for length < L; Markov-type families store their order-D tables and are read as order-D
chains beyond, see [`TableModel`][spectheory.inputs.models.TableModel]) and names the one knob that
controls how far the draft is from the target. Out-of-range parameters raise
[`InstanceError`][spectheory.runtime.errors.InstanceError] with a one-line message.

==============  ==============  =========================================================
family          divergence knob  draft q from target p
==============  ==============  =========================================================
dirichlet       alpha            independent Dirichlet(alpha) rows for p and q (smaller
                                 alpha: peakier, more dissimilar rows)
logit-noise     sigma            q = softmax(log p + sigma * z), z ~ N(0, 1) fixed by seed
temperature     temperature      q = softmax(log p / T) (T = 1: q = p; T > 1 flatter)
mixture         eps              q = (1 - eps) p + eps * uniform
markov          lam              bigram chains: Q = (1 - lam) P + lam R, R an independent
                                 random bigram (lam = 0: q = p)
ngram           draft_order      character n-gram models estimated from a public-domain text:
                                 target of order n, draft of lower order and/or on less text
two-token       q0               the two-token example of Sun et al. (arXiv 2403.10444):
                                 p = (1/3, 2/3), q = (2/3, 1/3), context independent
==============  ==============  =========================================================

The Dirichlet rows come from [`dirichlet_model`][spectheory.inputs.random_instances.dirichlet_model] (one
copy of that code). For the knob families (logit-noise, temperature, mixture, markov) the random
draws do not depend on the knob, so for a fixed seed the instance moves continuously with the knob
(useful to match an acceptance rate by bisection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from spectheory.runtime.errors import InstanceError
from spectheory.inputs.instances import Instance
from spectheory.inputs.models import TableModel
from spectheory.inputs.random_instances import ALPHA_RANGE, dirichlet_model, random_instance

from .checks import (MAX_TOY_VOCAB, check_denominator, check_range, check_seed, check_sizes,
                     checked, text_knob)
from .ngram import ngram_instance
from spectheory.runtime.limits import shown as _repr_cut

#: Smallest probability a logit is taken of (keeps log p finite for zero entries).
LOG_FLOOR = 1e-300


# ----------------------------------------------------------------------------- families


def dirichlet(vocab_size: int = 4, block_length: int = 4, seed: int = 0, alpha: float = 1.0,
              context_independent: bool = False, denominator: int | None = None) -> Instance:
    """Independent Dirichlet(alpha) rows for target and draft (knob: alpha in [0.001, 10^6], the
    range of `random_instance`).

    Wraps [`random_instance`][spectheory.inputs.random_instances.random_instance]; ``denominator`` rounds
    rows to exact multiples of 1/denominator (Fractions, for exact analysis).
    """
    check_sizes(vocab_size, block_length, context_independent)
    check_range("alpha", alpha, *ALPHA_RANGE)
    denominator = check_denominator(denominator)
    return random_instance(vocab_size, block_length, check_seed(seed), alpha=alpha,
                           context_independent=context_independent, denominator=denominator)


def _softmax_rows(logits: np.ndarray, T: float = 1.0) -> np.ndarray:
    """softmax(logits / T) by rows, the largest logit subtracted before dividing by T: a T of
    1e-320 gave (-inf) - (-inf) = NaN rows; it now gives the one-hot limit."""
    with np.errstate(over="ignore"):
        z = (logits - logits.max(axis=1, keepdims=True)) / T
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def perturbed_logits(vocab_size: int = 4, block_length: int = 4, seed: int = 0,
                     sigma: float = 0.5, temperature: float = 1.0, alpha: float = 1.0,
                     context_independent: bool = False) -> Instance:
    """Target rows ~ Dirichlet(alpha); draft rows q = softmax((log p + sigma z) / T).

    z ~ N(0, 1) i.i.d. per entry, drawn from the seed independently of sigma and T, so the
    instance is continuous in both knobs; sigma = 0 and T = 1 give q = p up to rounding (a
    softmax of log p: within about 1e-16).
    """
    V, L = check_sizes(vocab_size, block_length, context_independent)
    sigma = check_range("sigma", sigma, 0, math.inf, hi_open=True)
    T = check_range("temperature", temperature, 0, math.inf, lo_open=True, hi_open=True)
    check_range("alpha", alpha, *ALPHA_RANGE)
    rng = np.random.default_rng(check_seed(seed))
    target = dirichlet_model(rng, V, L, alpha, context_independent)
    tables = []
    for d in range(1 if context_independent else L):
        p = target.tables[d]
        z = rng.standard_normal(p.shape)
        with np.errstate(over="ignore", invalid="ignore"):  # overflowing rows: refused below
            tables.append(_softmax_rows(np.log(np.maximum(p, LOG_FLOOR)) + sigma * z, T))
    return checked(Instance(V, L, target, TableModel(V, tuple(tables))),
                   f"sigma = {sigma:g}, temperature = {T:g}")


def logit_noise(vocab_size: int = 4, block_length: int = 4, seed: int = 0, sigma: float = 0.5,
                alpha: float = 1.0, context_independent: bool = False) -> Instance:
    """Draft = target logits plus Gaussian noise of scale sigma >= 0 (knob: sigma)."""
    return perturbed_logits(vocab_size, block_length, seed, sigma=sigma, alpha=alpha,
                            context_independent=context_independent)


def temperature(vocab_size: int = 4, block_length: int = 4, seed: int = 0,
                temperature: float = 2.0, alpha: float = 1.0,
                context_independent: bool = False) -> Instance:
    """Draft = target at another temperature T > 0, q ~ p^(1/T) (knob: temperature; 1 = same)."""
    return perturbed_logits(vocab_size, block_length, seed, sigma=0.0, temperature=temperature,
                            alpha=alpha, context_independent=context_independent)


def mixture(vocab_size: int = 4, block_length: int = 4, seed: int = 0, eps=0.5,
            alpha: float = 1.0, context_independent: bool = False,
            denominator: int | None = None) -> Instance:
    """Draft q = (1 - eps) p + eps / V with target rows ~ Dirichlet(alpha) (knob: eps in [0, 1]).

    Per node TV(p, q) = eps * TV(p, uniform). With ``denominator`` the target rows are exact
    multiples of 1/denominator and eps is read as an exact rational (give a Fraction or a string
    such as "1/4"), so the draft is exact too.
    """
    V, L = check_sizes(vocab_size, block_length, context_independent)
    exact = denominator is not None
    eps = text_knob("eps", eps)
    check_range("eps", eps, 0, 1)
    check_range("alpha", alpha, *ALPHA_RANGE)
    denominator = check_denominator(denominator)
    rng = np.random.default_rng(check_seed(seed))
    target = dirichlet_model(rng, V, L, alpha, context_independent, denominator)
    e = (Fraction(eps) if not isinstance(eps, float) else Fraction(repr(eps))) if exact else float(eps)
    tables = []
    for d in range(1 if context_independent else L):
        p = target.tables[d]
        tables.append((1 - e) * p + e / V)
    return checked(Instance(V, L, target, TableModel(V, tuple(tables))), f"mixture eps = {eps}")


def markov(vocab_size: int = 4, block_length: int = 4, seed: int = 0, lam: float = 0.5,
           alpha: float = 1.0) -> Instance:
    """A pair of bigram (order-1 Markov) chains (knob: lam in [0, 1]).

    Target: initial row p_0 and transition matrix P, rows ~ Dirichlet(alpha). Draft: initial
    (1 - lam) p_0 + lam r_0 and transition Q = (1 - lam) P + lam R, with (r_0, R) an independent
    random bigram; lam = 0 gives q = p, lam = 1 two unrelated chains. Both are stored as depth-1
    tables, i.e. read as order-1 chains at every depth.
    """
    V, L = check_sizes(vocab_size, block_length, table_depth=1)
    lam = check_range("lam", lam, 0, 1)
    check_range("alpha", alpha, *ALPHA_RANGE)
    rng = np.random.default_rng(check_seed(seed))
    target = dirichlet_model(rng, V, 1, alpha)
    other = dirichlet_model(rng, V, 1, alpha)
    draft = TableModel(V, tuple((1 - lam) * p + lam * r
                                for p, r in zip(target.tables, other.tables)))
    return checked(Instance(V, L, target, draft), f"markov lam = {lam:g}")


def two_token(block_length: int = 2, p0="1/3", q0="2/3", exact: bool = True,
              seed: int | None = None) -> Instance:
    """The two-token example of Sun et al. (arXiv 2403.10444): context-independent
    p = (p0, 1 - p0), q = (q0, 1 - q0), default p0 = 1/3, q0 = 2/3, L = 2 (E[tau] = 10/9 token,
    11/9 block). Knob: q0 in [0, 1] (per-step TV = |p0 - q0|). Deterministic: ``seed`` (None or
    an integer >= 0, checked as the other families check it) is accepted for a uniform signature
    and ignored.
    """
    V, L = check_sizes(2, block_length, context_independent=True)
    if seed is not None:  # ignored, but a seed all the same (as every other family reads it)
        check_seed(seed)
    if not isinstance(exact, (bool, np.bool_)):  # "no" would read as True
        raise InstanceError(f"exact must be true or false, got {_repr_cut(exact, 40)}")
    vals = []
    for name, v in (("p0", p0), ("q0", q0)):
        v = text_knob(name, v)
        check_range(name, v, 0, 1)
        vals.append((Fraction(v) if not isinstance(v, float) else Fraction(repr(v)))
                    if exact else float(v))
    dtype = object if exact else np.float64
    rows = [np.array([[v, 1 - v]], dtype=dtype) for v in vals]
    return Instance(V, L, TableModel(V, (rows[0],)), TableModel(V, (rows[1],)))


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Family:
    """A toy family: ``make(**params)`` returns an Instance; ``knob`` names the parameter that
    controls draft/target divergence and ``knob_range`` its valid values; ``same_at`` is the
    knob value where the draft equals the target (None if there is none)."""

    name: str
    make: Callable[..., Instance]
    knob: str
    knob_range: str
    more_divergent: str
    same_at: object
    description: str


FAMILIES: dict[str, Family] = {
    f.name: f for f in [
        Family("dirichlet", dirichlet, "alpha", "[0.001, 1e6]", "smaller alpha", None,
               "independent Dirichlet(alpha) conditionals for target and draft"),
        Family("logit-noise", logit_noise, "sigma", "[0, inf)", "larger sigma", 0.0,
               "draft = softmax(target logits + sigma * N(0,1) noise)"),
        Family("temperature", temperature, "temperature", "(0, inf)",
               "temperature further from 1", 1.0, "draft = target at temperature T"),
        Family("mixture", mixture, "eps", "[0, 1]", "larger eps", 0.0,
               "draft = (1 - eps) target + eps uniform"),
        Family("markov", markov, "lam", "[0, 1]", "larger lam", 0.0,
               "bigram chains; draft transition = (1 - lam) target + lam random bigram"),
        Family("ngram", ngram_instance, "draft_order", "1..order", "smaller draft_order", None,
               "character n-grams from a public-domain text (Bierce, The Devil's Dictionary)"),
        Family("two-token", two_token, "q0", "[0, 1]", "|q0 - p0| larger", "p0",
               "the two-token example of Sun et al.: p = (1/3, 2/3), q = (2/3, 1/3)"),
    ]
}


def make_instance(family: str, **params) -> Instance:
    """Build an instance of the named family (see `FAMILIES`)."""
    if not isinstance(family, str) or family not in FAMILIES:
        raise InstanceError(f"unknown toy family {family!r}; choose from {', '.join(FAMILIES)}")
    import inspect

    fam = FAMILIES[family]
    try:
        known = [n for n, p in inspect.signature(fam.make).parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        known = None
    unknown = [k for k in params if known is not None and k not in known]
    if unknown:  # named with the family's parameters, not in Python's words
        raise InstanceError(f"toy family {family!r} has no parameter {unknown[0]!r}; its "
                            f"parameters are {', '.join(known)}")
    try:
        return fam.make(**params)
    except TypeError as exc:  # a parameter the signature takes through **kwargs
        raise InstanceError(f"toy family {family!r}: {exc}") from None
