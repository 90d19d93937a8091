"""Grammar-constrained speculative decoding (Nie et al., arXiv 2605.07698): the locally masked law
mu_proj, the grammar-conditional law mu*, the future validity Phi and FVO-Spec's
Doob-transformed target, exactly, against a brute force written separately
(`independent_claims`: own Dyck and JSON checkers, own masking, own token and block
verification); token and block verification under local masks sample mu_proj, against the exact
Phi they sample mu*; the lookahead estimates sit between the two and under the chained bound;
planted bugs (Phi one step short, masks on the draft only) are caught."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

import independent_claims as ind
import spectheory as st
from spectheory.inputs import grammar_laws as G
from spectheory.inputs.instances import instance_from_dict, instance_to_dict
from spectheory.inputs.processing import SamplingParams
from spectheory.runtime.errors import OptionError, SizeLimitError
from spectheory.inputs.stateful import GrammarError


def positive(V, L, seed, d=6):
    """random_instance(V, L, seed, d) with every row mixed half-half with the uniform row:
    prefix-dependent, exact, every entry positive (ties from the uniform half)."""
    data = instance_to_dict(st.random_instance(V, L, seed, denominator=d))
    def mix(row):
        return [str((F(x) + F(1, V)) / 2) for x in row]

    for key in ("target", "draft"):
        rows = data[key]
        data[key] = mix(rows) if isinstance(rows, list) else \
            {k: mix(row) for k, row in rows.items()}
    return instance_from_dict(data, exact=True)


def dyck1_adversarial(L, b=F(9, 10), eos=F(1, 1000)):
    """The target prefers '(' (b), closes rarely, stops very rarely; the draft uniform."""
    row = [b, 1 - b - eos, eos]
    return instance_from_dict({"vocab_size": 3, "block_length": L,
                               "target": [str(x) for x in row],
                               "draft": ["1/3", "1/3", "1/3"]}, exact=True)


CASES = [  # (name, instance, our grammar, independent status, N)
    ("dyck1 adversarial", dyck1_adversarial(3), G.dyck1(), ind.dyck_status(1, 2), 4),
    ("dyck1 depth 2, random", positive(3, 2, 0), G.dyck1(2), ind.dyck_status(1, 2, 2), 3),
    ("dyck1 depth 1, random", positive(3, 3, 5), G.dyck1(1), ind.dyck_status(1, 2, 1), 4),
    ("dyck2 depth 2, random", positive(5, 2, 1), G.dyck2(2), ind.dyck_status(2, 4, 2), 3),
    ("json-like, random", positive(7, 2, 3, 12), G.json_like(), ind.json_status, 3),
]
IDS = [c[0] for c in CASES]


def model(inst):
    return ind.Model(instance_to_dict(inst))


def as_dict(law, V, N):
    return {x: law[i] for i, x in enumerate(itertools.product(range(V), repeat=N))}


# ----------------------------------------------------------------------------- the laws


@pytest.mark.parametrize("name, inst, g, status, N", CASES, ids=IDS)
def test_laws_equal_the_brute_force_exactly(name, inst, g, status, N):
    m, V = model(inst), inst.vocab_size
    proj, star = ind.proj_law(m, status, N), ind.star_law(m, status, N)
    assert as_dict(G.masked_law(inst, g, N), V, N) == proj
    assert as_dict(G.grammar_conditional_law(inst, g, N), V, N) == star
    tv = G.masking_tv(inst, g, N)
    assert isinstance(tv, F) and tv == ind.law_tv(proj, star) and tv > 0
    # Phi(s) p(s) = the valid mass below s, at every depth
    phi = G.future_validity(inst, g, N)
    valid = {x: m.P(x) for x in m.seqs(N) if status(x) == "ended"}
    for d in range(N + 1):
        for i, s in enumerate(itertools.product(range(V), repeat=d)):
            assert phi[d][i] * m.P(s) == sum((v for x, v in valid.items() if x[:d] == s), F(0))


def test_float_instances_give_float64_laws_that_agree():
    inst = positive(3, 2, 0)
    g = G.dyck1(2)
    a = G.grammar_conditional_law(inst.to_float(), g, 3)
    assert a.dtype == np.float64
    assert np.allclose(a, G.grammar_conditional_law(inst, g, 3).astype(float), atol=1e-15)
    assert abs(G.masking_tv(inst.to_float(), g, 3) - float(G.masking_tv(inst, g, 3))) < 1e-14


# ----------------------------------------------------------------------------- verification


@pytest.mark.parametrize("name, inst, g, status, N", CASES, ids=IDS)
def test_local_masks_sample_mu_proj_and_fvo_spec_samples_mu_star(name, inst, g, status, N):
    assert N == inst.block_length + 1
    m, V = model(inst), inst.vocab_size
    proj, star = ind.proj_law(m, status, N), ind.star_law(m, status, N)
    sp = SamplingParams(grammar=g)
    local = ind.grammar_verification_laws(m, status, fvo=False)
    fvo = ind.grammar_verification_laws(m, status, fvo=True)
    fvo_inst = G.grammar_conditional_instance(inst, g, N)
    for v in ("token", "block"):
        res = st.analyze(inst, v, sampling=sp, draft_sampling=sp, exact=True)
        out = as_dict(res.output_law, V, N)
        assert out == proj == {k: local[v][0].get(k, F(0)) for k in proj}
        assert res.tv_to_target == 0 and res.block_efficiency == local[v][1]
        assert ind.law_tv(out, star) == G.masking_tv(inst, g, N)
        res = st.analyze(fvo_inst, v, draft_sampling=sp, exact=True)
        out = as_dict(res.output_law, V, N)
        assert out == star == {k: fvo[v][0].get(k, F(0)) for k in star}
        assert res.block_efficiency == fvo[v][1]


def test_masks_on_the_target_only_still_sample_mu_proj_and_on_the_draft_only_do_not():
    name, inst, g, status, N = CASES[1]
    sp = SamplingParams(grammar=g)
    proj = G.masked_law(inst, g, N)
    # lossless verification samples its target whatever the draft: the law is mu_proj ...
    a = st.analyze(inst, "block", sampling=sp, exact=True)
    b = st.analyze(inst, "block", sampling=sp, draft_sampling=sp, exact=True)
    assert list(a.output_law) == list(proj) and a.block_efficiency != b.block_efficiency
    # ... while a target left unmasked (the planted bug: masks on the draft only) is p's law
    bug = st.analyze(inst, "block", draft_sampling=sp, exact=True)
    assert G.total_variation(bug.output_law, proj) > F(1, 10)


def test_planted_bug_phi_one_step_short_is_caught():
    """Phi read one token short (the horizon N - 1 for a block of N tokens, or Phi(s) in place
    of Phi(s a)) is not mu*: its law differs, and the verification against it is caught."""
    name, inst, g, status, N = CASES[1]
    m = model(inst)
    star = ind.star_law(m, status, N)
    short = G.future_validity(inst, g, N - 1) + [None]
    short[N] = np.array([short[N - 1][i // 3] for i in range(3 ** N)], dtype=object)
    bug = G.doob_law(inst, short, N)
    assert ind.law_tv(as_dict(bug, 3, N), star) > F(1, 100)
    # the row at depth d weighted by Phi at depth d (the parent's) is the raw target
    phi = G.future_validity(inst, g, N)
    lag = [phi[0]] + [np.repeat(phi[d - 1], 3) for d in range(1, N + 1)]
    assert ind.law_tv(as_dict(G.doob_law(inst, lag, N), 3, N), star) > F(1, 2)
    assert G.doob_law(inst, phi, N).tolist() == list(star.values())


# ----------------------------------------------------------------------------- estimates


@pytest.mark.parametrize("name, inst, g, status, N", CASES[:4], ids=IDS[:4])
def test_lookahead_estimates_interpolate_and_obey_the_chained_bound(name, inst, g, status, N):
    m, V = model(inst), inst.vocab_size
    star = ind.star_law(m, status, N)
    proj = ind.proj_law(m, status, N)
    for k in range(N + 1):
        phi = G.lookahead_validity(inst, g, N, k)
        law = as_dict(G.doob_law(inst, phi, N), V, N)
        assert law == ind.lookahead_law(m, status, N, k)
        tv = ind.law_tv(law, star)
        assert tv <= G.chain_tv_bound(inst, g, N, phi)
        if k == 0:
            assert law == proj
        if k >= N - 1:  # the window from the root's children reaches N
            assert law == star and G.chain_tv_bound(inst, g, N, phi) == 0


def test_the_gap_on_dyck_reaches_the_papers_size():
    # arXiv 2605.07698 reports TV up to 0.996 on Dyck grammars (Qwen3-8B); exactly here:
    inst = dyck1_adversarial(3)
    tv = G.masking_tv(inst, G.dyck1(), 4)
    m = model(inst)
    status = ind.dyck_status(1, 2)
    assert tv == ind.law_tv(ind.proj_law(m, status, 4), ind.star_law(m, status, 4))
    assert tv == F(30000000, 30036637) and tv > F(996, 1000)


# ----------------------------------------------------------------------------- grammars, inputs


def test_grammars_accept_exactly_the_independent_languages():
    for g, status, V, N in [(G.dyck1(), ind.dyck_status(1, 2), 3, 6),
                            (G.dyck1(2), ind.dyck_status(1, 2, 2), 3, 6),
                            (G.dyck2(2), ind.dyck_status(2, 4, 2), 5, 5),
                            (G.json_like(), ind.json_status, 7, 5)]:
        allowed, ended, _ = G.validity_levels(g, V, N)
        for d in range(N + 1):
            for i, x in enumerate(itertools.product(range(V), repeat=d)):
                s = status(x)
                assert bool(allowed[d][i]) == (s != "bad"), (g, x)
                assert bool(ended[d][i]) == (s == "ended"), (g, x)


def test_bad_inputs_are_one_line_errors():
    inst = positive(3, 2, 0)
    with pytest.raises(SizeLimitError, match="over the limit"):
        G.masked_law(inst, G.dyck1(), 40)
    with pytest.raises(GrammarError, match="tokens"):
        G.future_validity(inst, G.dyck2(), 3)
    with pytest.raises(OptionError, match="horizon"):
        G.future_validity(inst, G.dyck1(), 0)
    with pytest.raises(OptionError, match=r"L \+ 1"):
        G.grammar_conditional_instance(inst, G.dyck1(), 2)
    with pytest.raises(OptionError, match="lookahead"):
        G.lookahead_validity(inst, G.dyck1(), 3, -1)
    from spectheory.inputs.stateful import TokenAutomaton

    with pytest.raises(GrammarError, match="stop token"):
        G.future_validity(inst, TokenAutomaton([[0, 0, 0]]), 3)
    with pytest.raises(GrammarError, match="no sequence"):  # "{}" needs 3 tokens
        G.grammar_conditional_law(positive(7, 1, 0, 12), G.json_like(), 2)
    # prefix validity needs no stop token: Phi(()) = P_p(token 2 never drawn in 3 tokens)
    phi = G.future_validity(inst, TokenAutomaton([[0, 0, -1]]), 3, complete=False)
    m = model(inst)
    assert phi[0] == sum((m.P(x) for x in m.seqs(3) if 2 not in x), F(0)) < 1


# ----------------------------------------------------------------------------- the ledger rows


def test_ledger_rows_recomputed_by_the_brute_force():
    from spectheory.lp import claims
    from spectheory.lp.claims import fvo_spec as D
    from spectheory.lp.claims.common import f

    rows = {r.claim.id: r for r in claims.run_claims("fvo-")}
    assert all(r.matches for r in rows.values())
    statuses = [ind.dyck_status(1, 2), ind.dyck_status(1, 2, 2), ind.dyck_status(2, 4, 2),
                ind.json_status]
    for (label, inst, g, N), status in zip(D.cases(), statuses):
        m = model(inst)
        star, proj = ind.star_law(m, status, N), ind.proj_law(m, status, N)
        gap = ind.law_tv(proj, star)
        assert f"{label}: TV(mu_proj, mu*) = {f(gap)}" in \
            rows["fvo-local-masks-sample-proj"].finding.ours
        fvo = ind.grammar_verification_laws(m, status, fvo=True)
        local = ind.grammar_verification_laws(m, status, fvo=False)
        for v in ("token", "block"):
            assert ind.law_tv(fvo[v][0], star) == 0
            assert (f"{v}: TV to mu* 0, E[tau + 1] {f(fvo[v][1])} (local masks "
                    f"{f(local[v][1])})") in rows["fvo-spec-exact-phi"].finding.ours
        if status is not ind.json_status:
            text = rows["fvo-approx-phi-chained-bound"].finding.ours
            for k in range(N + 1):
                tv = ind.law_tv(ind.lookahead_law(m, status, N, k), star)
                assert f"k = {k}: TV {float(tv):.6g} <=" in text
    # the Dyck gap: own enumeration of the adversarial instances
    gap = rows["fvo-dyck-gap"]
    assert gap.finding.verdict == "reproduced"
    for L, inst, status in [(3, D.adversarial(3), ind.dyck_status(1, 2)),
                            (5, D.adversarial(5), ind.dyck_status(1, 2)),
                            (3, D.dyck2_adversarial(3), ind.dyck_status(2, 4, 3))]:
        m = model(inst)
        tv = ind.law_tv(ind.proj_law(m, status, L + 1), ind.star_law(m, status, L + 1))
        assert tv > F(996, 1000) and f"{f(tv)} = {float(tv):.6f}" in gap.finding.ours


# ----------------------------------------------------------------------------- the figure


def test_figure_draws_each_verifier_in_its_palette_style(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from spectheory.cli import figures
    from spectheory.sweep.palette import verifier_style

    module = figures.load(figures.scripts(figures.gallery_folder())["fig12_constrained_decoding"])
    kept = []
    monkeypatch.setattr(module, "save", lambda fig, out, stem, quick=False: kept.append(fig))
    pt = {"b": 0.5, "tv_proj_star": 0.5}
    for key in ("local", "fvo", "lookahead1"):
        for v in ("token", "block"):
            pt[f"{key}_{v}_tv"], pt[f"{key}_{v}_be"] = 0.1, 2.0
    module.draw({"L": 3, "stop": "1/10", "panels": {"dyck1": [pt, dict(pt, b=0.6)]}}, tmp_path)
    [fig] = kept
    lines = [ln for ax in fig.axes for ln in ax.get_lines()]
    assert len(lines) == 12
    for ln in lines:
        v = ln.get_label().split(",")[0]
        s = verifier_style(v)
        assert ln.get_marker() == s.marker and ln.get_linestyle() == s.linestyle
        if "lookahead" not in ln.get_label():
            assert to_hex(ln.get_color()) == to_hex(s.color)
        hollow = "FVO" in ln.get_label() or "lookahead" in ln.get_label()
        assert (ln.get_markerfacecolor() == "none") == hollow
    # the committed full run: FVO-Spec's TV is 0 and local masks' equals TV(mu_proj, mu*)
    import json

    data = json.loads((figures.gallery_folder() / "figures.json").read_text())
    for pts in data["fig12_constrained_decoding"]["panels"].values():
        for p in pts:
            assert p["fvo_token_tv"] < 1e-12 and p["fvo_block_tv"] < 1e-12
            for v in ("token", "block"):
                assert abs(p[f"local_{v}_tv"] - p["tv_proj_star"]) < 1e-12
                assert p[f"lookahead1_{v}_tv"] < p["tv_proj_star"]


def test_the_docs_example_runs_as_printed():
    from pathlib import Path

    import test_docs_examples as docs

    page = Path(__file__).resolve().parent.parent / "docs" / "constrained-decoding.md"
    [block] = docs.python_blocks(page)
    assert docs.run_block(block) == 3


def test_prefix_validity_follows_the_complete_flag_everywhere():
    """complete=False (a valid prefix suffices, not a complete word) reaches mu* in masking_tv and
    in chain_tv_bound's reference: with the exact Phi of that setting the bound is 0, and
    masking_tv is the TV of the masked law to mu* of that setting (dropping the flag gave a
    bound above 1 and the complete-word TV 30000000/30036637)."""
    inst = instance_from_dict({"vocab_size": 3, "block_length": 1,
                               "target": ["9/10", "99/1000", "1/1000"],
                               "draft": ["1/3", "1/3", "1/3"]}, exact=True)
    g = G.dyck1()
    N = 3
    phi = G.future_validity(inst, g, N, complete=False)
    assert G.chain_tv_bound(inst, g, N, phi, complete=False) == 0
    direct = G.total_variation(G.masked_law(inst, g, N, True),
                               G.grammar_conditional_law(inst, g, N, False, True))
    assert G.masking_tv(inst, g, N, complete=False) == direct == F(2622836733, 296855683867)
    assert G.masking_tv(inst, g, N, complete=True) == F(30000000, 30036637)
