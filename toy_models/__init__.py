"""Toy (draft, target) model families for the exact theory and the figures.

Each family is a function of a seed and a few parameters returning a
`spectheory.inputs.instances.Instance`, and names the knob that controls draft/target divergence
(`FAMILIES`). See [`spectheory.toy_models.families`][spectheory.toy_models.families],
[`spectheory.toy_models.ngram`][spectheory.toy_models.ngram] (character n-grams from a public-domain
text) and [`spectheory.toy_models.divergence`][spectheory.toy_models.divergence] (TV / KL along the
draft's paths).
"""

from .divergence import mean_acceptance, mean_divergence, per_position_divergence
from .families import (
    FAMILIES,
    Family,
    dirichlet,
    logit_noise,
    make_instance,
    markov,
    mixture,
    perturbed_logits,
    temperature,
    two_token,
)
from .ngram import ngram_instance

__all__ = [
    "FAMILIES",
    "Family",
    "dirichlet",
    "logit_noise",
    "make_instance",
    "markov",
    "mean_acceptance",
    "mean_divergence",
    "mixture",
    "ngram_instance",
    "per_position_divergence",
    "perturbed_logits",
    "temperature",
    "two_token",
]
