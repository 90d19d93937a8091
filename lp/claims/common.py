"""Row and finding types of the claims ledger, its instances, and the exact computations its checks
share; every computation a check runs records what it ran on (`Fact`), so that the ledger can
assert that the instance satisfies the row's hypotheses
([`Hypotheses.admits`][spectheory.lp.claims.common.Hypotheses.admits])."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

#: Verdicts. ``reproduced`` / ``not reproduced`` are for empirical observations only.
VERDICTS = ("confirmed", "refuted", "qualified", "reproduced", "not reproduced")
#: What a row's source asserts.
KINDS = ("theorem", "lemma", "conjecture", "algorithm property", "stated result",
         "empirical observation", "released code", "engine behaviour", "spectheory result")
#: Verdicts a row of each kind may take (an observation is reproduced or not, never refuted).
KIND_VERDICTS = {k: VERDICTS[:3] for k in KINDS}
KIND_VERDICTS["empirical observation"] = ("reproduced", "not reproduced")

#: Drafting schemes a fact may name: K paths i.i.d. from the one draft model (identical drafts),
#: first tokens without replacement, SpecHub's hub pair, a drafted tree, a single path.
DRAFTINGS = ("iid", "norep", "hub", "tree", "single")


@dataclass(frozen=True)
class Fact:
    """One computation a check ran: the drafting scheme, the number of paths K, the block length
    L, whether the instance's rows depend on the prefix, whether the numbers are exact
    (rationals), and that it is one iteration (every computation of the ledger is)."""

    drafting: str
    K: int
    L: int
    prefix_dependent: bool
    exact: bool
    iterations: int = 1


@dataclass(frozen=True)
class Hypotheses:
    """The conditions under which the source states its claim. ``drafting``: the schemes allowed;
    ``K`` / ``L``: the allowed numbers of paths and block lengths (None: any); ``exact``: the
    numbers must be exact rationals; ``notes``: the conditions that are not numbers (cross-
    iteration corrections, the released code's control flow), stated in words; ``kit``: the
    instance and hypotheses are those the bug kit states for its own claim (its tests assert
    them), so the row records no facts of its own; ``context_independent``: the rows of p and q
    may not depend on the prefix; ``iterations``: the source's setting in words (every computation
    of the ledger is one iteration: a verifier lossless within one iteration is lossless over a
    generation)."""

    drafting: tuple = ("iid",)
    K: tuple | None = None
    L: tuple | None = None
    exact: bool = True
    notes: str = ""
    kit: bool = False
    context_independent: bool = False
    iterations: str = "one iteration"

    def admits(self, fact: Fact) -> str | None:
        """None when ``fact`` lies within these hypotheses, else the reason it does not."""
        if fact.drafting not in self.drafting:
            return f"drafting {fact.drafting} not in {self.drafting}"
        if self.K is not None and fact.K not in self.K:
            return f"K = {fact.K} not in {self.K}"
        if self.L is not None and fact.L not in self.L:
            return f"L = {fact.L} not in {self.L}"
        if self.exact and not fact.exact:
            return "float64 where the row states exact rationals"
        if fact.iterations != 1:
            return "more than one iteration"
        if self.context_independent and fact.prefix_dependent:
            return "prefix-dependent rows where the row states context-independent ones"
        return None

    def text(self) -> str:
        if self.kit:
            return self.notes

        def rng(v):
            return "any" if v is None else ", ".join(map(str, v))
        names = {"iid": "K i.i.d. paths from one draft model (identical drafts)",
                 "norep": "first tokens without replacement", "hub": "SpecHub's hub pair",
                 "tree": "a drafted tree", "single": "one drafted path"}
        parts = [" or ".join(names[d] for d in self.drafting), f"K: {rng(self.K)}",
                 f"L: {rng(self.L)}", self.iterations]
        if self.context_independent:
            parts.append("context-independent rows")
        parts.append("checked in exact rationals" if self.exact else "checked in float64")
        return "; ".join(parts) + (f"; {self.notes}" if self.notes else "")


@dataclass(frozen=True)
class Finding:
    """What a check computed: spectheory's number(s), the verdict, the instance(s), and the
    facts (`Fact`) of the computations it ran."""

    ours: str
    verdict: str
    instance: str
    facts: tuple = ()


@dataclass(frozen=True)
class Claim:
    """One row of the ledger.

    ``id``; ``source`` (arXiv id, or project and issue / pull request); ``where`` (theorem,
    equation, section, file); ``kind`` (one of `KINDS`); ``claim`` (the claim as the source states
    it, in spectheory's letters, closely paraphrased); ``notation`` (the map from the source's
    letters and counts to spectheory's: which is the draft and which the target, what tau
    counts, E[tau] or E[tau + 1], per iteration or per generation); ``hypotheses``
    (`Hypotheses`); ``recorded`` (the verdict recorded in the repository); ``check``;
    ``reading`` (shared reading): where the source leaves a choice open (a rule rebuilt from a
    summary, a tie, a step the paper does not publish, two sources whose letters differ), the
    reading that the check and its independent recomputation (``tests/independent_claims.py``)
    both follow, so that their agreement does not test that choice; empty when the two
    implementations take nothing from each other beyond the source's text."""

    id: str
    source: str
    where: str
    kind: str
    claim: str
    notation: str
    hypotheses: Hypotheses
    recorded: str
    check: Callable[[], Finding]
    reading: str = ""

    @property
    def command(self) -> str:
        return f"spectheory claims --only {self.id}"


#: spectheory's own letters, the reference of every notation map.
OURS = ("spectheory: p the target, q the draft; tau = draft tokens accepted in one iteration; "
        "E[tau + 1] = tokens emitted per iteration (block efficiency)")

# ----------------------------------------------------------------------------- facts

_FACTS: list[Fact] = []


def reset_facts() -> None:
    _FACTS.clear()


def take_facts() -> tuple:
    out = tuple(_FACTS)
    _FACTS.clear()
    return out


def _valid(inst) -> tuple[bool, bool]:
    """(prefix_dependent, exact) of an instance after asserting that every row is a
    distribution (exactly when the rows are rationals)."""
    exact = bool(inst.exact)
    for model in (inst.target, inst.draft):
        for table in model.tables:
            for row in table:
                if exact:
                    if any(Fraction(x) < 0 for x in row) or sum(Fraction(x) for x in row) != 1:
                        raise AssertionError("an instance row is not a distribution")
    dep = not (inst.target.context_independent and inst.draft.context_independent)
    return dep, exact


def note(inst, drafting: str, K: int) -> None:
    """Record that a check computed on ``inst`` with ``drafting`` and K paths."""
    dep, exact = _valid(inst)
    _FACTS.append(Fact(drafting, K, inst.block_length, dep, exact))


def note_rows(p, q, drafting: str, K: int, exact: bool | None = None) -> None:
    """Record a one-step (L = 1) computation on the rows ``p``, ``q`` (``exact``: False for a
    float64 computation on exact rows)."""
    rational = all(isinstance(x, Fraction) for x in list(p) + list(q))
    exact = rational if exact is None else exact and rational
    if rational and (sum(p) != 1 or sum(q) != 1 or min(p) < 0 or min(q) < 0):
        raise AssertionError("a row is not a distribution")
    _FACTS.append(Fact(drafting, K, 1, False, exact))


# ----------------------------------------------------------------------------- instances


def toy(L: int = 2):
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({"vocab_size": 2, "block_length": L, "target": ["1/3", "2/3"],
                               "draft": ["2/3", "1/3"]}, exact=True)


def rnd(V, L, seed, d=8):
    from spectheory.inputs.random_instances import random_instance

    return random_instance(V, L, seed, denominator=d)


def one(p, q):
    from spectheory.inputs.instances import instance_from_dict

    return instance_from_dict({"vocab_size": len(p), "block_length": 1, "target": p,
                               "draft": q}, exact=True)


def rows(inst):
    return list(inst.target.level(0)[0]), list(inst.draft.level(0)[0])


def _drafting_of(name, K, drafting):
    from spectheory.registry import get_verifier

    spec = get_verifier(name, multi_path=True)
    d = drafting or spec.default_drafting
    return spec, d


def be(inst, name, K=1, drafting=None):
    """Block efficiency E[tau + 1] of a registered verifier, exactly (one iteration)."""
    from spectheory.engine.analysis import analyze_multipath

    spec, d = _drafting_of(name, K, drafting)
    note(inst, d if K > 1 else "single", K)
    return analyze_multipath(inst, spec, K, d).block_efficiency


def tv(inst, name, K=1, drafting=None):
    """Exact total variation of one iteration's output law to the target."""
    from spectheory.engine.lossless import check_lossless_multipath

    spec, d = _drafting_of(name, K, drafting)
    note(inst, d if K > 1 else "single", K)
    return check_lossless_multipath(spec, inst, K, d).tv


def direct(inst, K, drafting="iid"):
    """The direct LP's optimum E[tau + 1] (every valid K-path verifier), exactly."""
    from ..direct import direct_lp

    note(inst, drafting if K > 1 else "single", K)
    return direct_lp(inst, K, exact=True, drafting=drafting).optimum


def analysis(inst, name):
    from spectheory.engine.analysis import analyze

    note(inst, "single", 1)
    return analyze(inst, name)


def f(x) -> str:
    x = Fraction(x)
    return str(x) if x.denominator <= 10**6 else f"{float(x):.12g}"


def all_hold(flags) -> str:
    return "confirmed" if all(flags) else "refuted"


RANDOM_L1 = [(3, 1, 4, 9), (4, 1, 9, 5), (3, 1, 2, 8), (4, 1, 5, 6)]
RANDOM_L2 = [(2, 2, 3, 8), (3, 2, 7, 9), (2, 3, 5, 10)]
