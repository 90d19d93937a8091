"""One drawing style per verifier and per optimum, for every figure and ``spectheory sweep plot``.

A verifier is drawn in the same colour, with the same marker and the same line style wherever it
appears: the gallery (``spectheory figures``, the ``figures/`` scripts) and the sweep's standard
views ([`plot_sweep`][spectheory.sweep.plot.plot_sweep]) take it from `VERIFIER_STYLE` through
[`verifier_style`][spectheory.sweep.palette.verifier_style], and the LP optima and bounds from
`OPTIMUM_STYLE` through [`optimum_style`][spectheory.sweep.palette.optimum_style].

Rules of the map:

* every verifier of the registry ([`registered`][spectheory.registry.registered]) and the
  tree rule ``topk`` has its own (colour, marker) pair; the multi-path verifiers, which figures 4,
  5 and 10 draw together, each have a colour of their own;
* the line style says under which drafting scheme the verifier is lossless: solid for i.i.d.
  drafts (and single-path verifiers), dashed for drafts without replacement, dash-dotted for
  SpecHub's hub drafting; dotted for the lossy rules and the bug replicas;
* the optima and bounds are black or grey, so they never read as a verifier.

A name outside the map (a user's ``module:function`` verifier, an entry-point plug-in) gets a
grey style picked by a stable hash of the name, so it too is drawn the same way in every figure.
Colours are matplotlib colour names; nothing here imports matplotlib.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple


class Style(NamedTuple):
    """How one series is drawn: a matplotlib colour, marker and line style."""

    color: str
    marker: str
    linestyle: str

    def kwargs(self) -> dict:
        """Keyword arguments of ``Axes.plot``."""
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle}


#: Line style by the drafting scheme under which a verifier is lossless (``"lossy"``: the lossy
#: rules and bug replicas).
LINESTYLE = {"iid": "-", "any": "-", "norep": "--", "hub": "-.", "lossy": ":"}

_I, _N, _H, _X = LINESTYLE["iid"], LINESTYLE["norep"], LINESTYLE["hub"], LINESTYLE["lossy"]

#: The style of every registered verifier (and the tree rule ``topk``).
VERIFIER_STYLE: dict[str, Style] = {
    # single path
    "token": Style("tab:orange", "s", _I),
    "block": Style("tab:blue", "o", _I),
    "ngram": Style("tab:olive", "o", _I),
    "hsd": Style("tab:cyan", "s", _I),
    "strict": Style("tab:gray", "D", _I),
    # K paths, lossless: one colour each
    "gbv": Style("tab:red", "D", _I),
    "specinfer": Style("tab:purple", "^", _I),
    "specinfer-norep": Style("darkmagenta", "v", _N),
    "spectr": Style("tab:brown", "s", _I),
    "traversal": Style("tab:green", "P", _N),
    "traversal-iid": Style("teal", "X", _I),
    "traversal-tree": Style("tab:olive", "h", _I),
    "hu": Style("navy", "<", _I),
    "hu-norep": Style("tab:cyan", ">", _N),
    "khisti": Style("darkgoldenrod", "d", _I),
    "global-resolution": Style("tab:pink", "*", _I),
    "spechub": Style("salmon", "p", _H),
    "block-first": Style("tab:blue", "H", _I),
    "token-first": Style("tab:orange", "8", _I),
    # tree rules for deterministic top-k children (SGLang's target-only rule: distinct siblings)
    "topk": Style("tab:gray", "p", _I),
    "sglang-tree": Style("tab:purple", "h", _N),
    # lossy rules and bug replicas
    "uniform-product": Style("tab:gray", "s", _X),
    "hsd-released": Style("tab:cyan", "x", _X),
    "gbv-mismatched-ties": Style("tab:red", "x", _X),
    "spectr-gbv": Style("tab:brown", "x", _X),
    "greedy": Style("tab:red", "o", _X),
    "threshold": Style("tab:purple", "s", _X),
    "lenient": Style("tab:green", "o", _X),
    "typical": Style("tab:brown", "^", _X),
    # relaxed acceptance (spectheory.verifiers.relaxed)
    "additive": Style("tab:blue", "v", _X),
    "multiplicative": Style("tab:orange", "v", _X),
    "top-m": Style("tab:green", "^", _X),
    "entropy-threshold": Style("tab:pink", "o", _X),
    "trtllm-relaxed": Style("tab:olive", "D", _X),
    "sglang-threshold": Style("tab:purple", "D", _X),
    "cactus": Style("tab:brown", "o", _X),
    "static-ensemble": Style("tab:cyan", "D", _X),
    "static-ensemble-greedy": Style("tab:cyan", "v", _X),
    # Medusa's typical acceptance as run (spectheory.verifiers.contrasts)
    "typical-medusa": Style("tab:brown", "v", _X),
    "typical-medusa-fast": Style("tab:brown", "<", _X),
    # speculative cascades (spectheory.verifiers.cascades)
    "cascade-opt": Style("darkgreen", "s", _X),
    "cascade-token-v1": Style("darkgreen", "^", _X),
    "cascade-token-v2": Style("darkgreen", "v", _X),
    "cascade-token-v3": Style("darkgreen", "D", _X),
    # vllm-ascend's entropy rules (spectheory.verifiers.entropy_verify, .ears)
    "entropy-verify": Style("darkorange", "P", _X),
    "ears": Style("darkorange", "X", _X),
}

#: The style of the LP optima and bounds, by problem (``direct`` and ``tree`` also by drafting
#: scheme: ``"direct norep"``, ``"tree topk"``, ...). Black and grey only, one (colour, marker)
#: pair each.
OPTIMUM_STYLE: dict[str, Style] = {
    "direct": Style("black", "x", "--"),
    "direct norep": Style("black", "+", "--"),
    "direct hub": Style("black", "1", "--"),
    "multipath": Style("black", ".", ":"),
    "node-budget": Style("dimgray", "x", "--"),
    "coupling": Style("tab:gray", "_", "--"),
    "selection": Style("dimgray", "s", "--"),
    "tree": Style("black", "P", "--"),
    "tree topk": Style("black", "X", "--"),
    "multidraft-l1": Style("dimgray", "o", ":"),
}

_SPARE_COLORS = ("dimgray", "darkgray", "slategray", "rosybrown", "darkkhaki")
_SPARE_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "d")


def verifier_style(name: str) -> Style:
    """The style of verifier ``name``: `VERIFIER_STYLE` for a known name, else a grey style
    picked by a stable hash (CRC-32) of the name, the same in every process and figure."""
    try:
        return VERIFIER_STYLE[name]
    except KeyError:
        h = zlib.crc32(name.encode("utf-8"))
        return Style(_SPARE_COLORS[h % len(_SPARE_COLORS)],
                     _SPARE_MARKERS[(h // len(_SPARE_COLORS)) % len(_SPARE_MARKERS)], "-")


def optimum_style(problem: str, drafting: str | None = None) -> Style:
    """The style of the LP optimum or bound ``problem`` (a sweep's ``[[optima]]`` problem) under
    ``drafting`` (``None``, ``""`` or ``"iid"``: the default scheme)."""
    if drafting and drafting != "iid" and f"{problem} {drafting}" in OPTIMUM_STYLE:
        return OPTIMUM_STYLE[f"{problem} {drafting}"]
    return OPTIMUM_STYLE.get(problem, Style("black", "x", "--"))
