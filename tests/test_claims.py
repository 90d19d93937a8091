"""The claims ledger (`spectheory claims`): every recomputed verdict equals the one recorded in
the repository (a regression test over all rows), every row states its location, kind, notation
map and hypotheses and its instances satisfy them (planted rows that break either are refused),
the ledger cites the papers it must, its docs page is the generated one, and the command line's
exit codes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_helpers import run

from spectheory.lp import claims

ROOT = Path(__file__).resolve().parents[1]
#: The papers the ledger must cite (seed papers and the multi-draft optimal-transport line).
REQUIRED_SOURCES = ["2211.17192", "2403.10444", "2602.16961", "2502.18779", "2410.18234",
                    "2411.05289", "2511.15898", "2604.25925", "2601.05724", "transformers 5.24.0",
                    "SGLang #35771", "mlxcel PR #992", "mlx-swift-lm PR #459", "fms-extras #12",
                    "2602.16994"]


@pytest.fixture(scope="module")
def rows():
    return claims.run_claims()


def test_every_verdict_is_as_recorded(rows):
    differ = [(r.claim.id, r.finding.verdict, r.claim.recorded) for r in rows if not r.matches]
    assert not differ, f"verdicts that differ from the recorded ones: {differ}"


def test_ledger_size_sources_and_commands(rows):
    assert len(rows) >= 50
    assert len({r.claim.id for r in rows}) == len(rows)
    sources = " ".join(r.claim.source for r in rows)
    missing = [s for s in REQUIRED_SOURCES if s not in sources]
    assert not missing, f"the ledger cites none of {missing}"
    for r in rows:
        assert r.finding.verdict in claims.VERDICTS
        assert r.claim.command == f"spectheory claims --only {r.claim.id}"
        assert r.finding.ours and r.finding.instance
    verdicts = {r.finding.verdict for r in rows}
    assert verdicts <= set(claims.VERDICTS)
    # the ledger refutes and qualifies, not only agrees
    assert {"confirmed", "refuted", "qualified"} <= verdicts


def test_every_row_states_its_source_terms(rows):
    for r in rows:
        c = r.claim
        assert c.kind in claims.KINDS, c.id
        assert c.where and c.claim and c.notation and c.hypotheses.text(), c.id
        if c.kind == "empirical observation":
            assert r.finding.verdict in ("reproduced", "not reproduced"), c.id
        if not c.hypotheses.kit:  # the facts of every computation lie within the hypotheses
            assert r.finding.facts, c.id
            assert all(c.hypotheses.admits(f) is None for f in r.finding.facts), c.id
    ids = {r.claim.id: r for r in rows}
    assert ids["gbv-monotone-K"].claim.kind == "empirical observation"
    assert ids["spectr-gbv-bound"].claim.hypotheses.K == (2,)
    assert "m_b" in ids["spectr-gbv-bound"].claim.notation


def _with(claim_id, **changes):
    c = next(c for c in claims.CLAIMS if c.id == claim_id)
    return [dataclasses.replace(x, **changes) if x is c else x for x in claims.CLAIMS]


def test_rows_outside_their_hypotheses_or_kind_are_refused(monkeypatch):
    # planted: the row claims K = 3 identical drafts, its check computes with K = 2
    monkeypatch.setattr(claims, "CLAIMS", _with(
        "khisti-closed-form", hypotheses=claims.Hypotheses(("iid",), K=(3,), L=(1,))))
    with pytest.raises(AssertionError, match="outside the row's hypotheses"):
        claims.run_claims("khisti-closed-form")
    # planted: a row whose instances are float64 while it states exact rationals
    monkeypatch.setattr(claims, "CLAIMS", _with(
        "khisti-ordering", hypotheses=claims.Hypotheses(("iid",), K=(2,), L=(1,))))
    with pytest.raises(AssertionError, match="float64"):
        claims.run_claims("khisti-ordering")
    # planted: a claim stated for context-independent rows checked on prefix-dependent ones
    from spectheory.lp.claims.common import be, rnd

    def on_prefix_rows():
        return claims.Finding(str(be(rnd(3, 2, 0), "token")), "confirmed", "random(3,2,0,8)")

    monkeypatch.setattr(claims, "CLAIMS", _with("leviathan-expected-tokens",
                                                check=on_prefix_rows))
    with pytest.raises(AssertionError, match="prefix-dependent"):
        claims.run_claims("leviathan-expected-tokens")
    # planted: an empirical observation may not be refuted
    monkeypatch.setattr(claims, "CLAIMS", _with("hsd-beats-block", kind="empirical observation"))
    with pytest.raises(AssertionError, match="may take"):
        claims.run_claims("hsd-beats-block")
    # planted: a check that records no computation asserts no hypothesis
    monkeypatch.setattr(claims, "CLAIMS", _with(
        "block-toy", check=lambda: claims.Finding("nothing", "confirmed", "none")))
    with pytest.raises(AssertionError, match="recorded no computation"):
        claims.run_claims("block-toy")


def test_docs_page_is_the_generated_one(rows):
    page = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    assert page == claims.markdown(rows), \
        "docs/claims.md is stale: run `spectheory claims --markdown > docs/claims.md`"


def test_cli_json_only_and_exit_codes(monkeypatch, capsys):
    code, out, err = run(["claims", "--only", "khisti-closed", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [d["id"] for d in data] == ["khisti-closed-form"]
    assert data[0]["verdict"] == data[0]["recorded"] == "confirmed"
    assert data[0]["where"] == "Theorem 3" and data[0]["kind"] == "theorem"
    assert "K: 2" in data[0]["hypotheses"] and data[0]["notation"]
    code, out, err = run(["claims", "--only", "no-such-claim"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "matches no claim" in err
    # a verdict that differs from the recorded one: exit 1, the row flagged
    monkeypatch.setattr(claims, "CLAIMS", _with("khisti-closed-form", recorded="refuted"))
    code, out, err = run(["claims", "--only", "khisti-closed"], capsys)
    assert code == 1 and "recorded refuted" in out
    code, out, err = run(["claims", "--only", "khisti", "--markdown"], capsys)
    assert code == 2 and out == "" and "drop --only" in err and len(err.strip().splitlines()) == 1


def test_shared_reading_is_shown_where_a_row_states_one(rows):
    """A row whose check and independent recomputation follow one reading of an open choice in
    the source says so: the field is on the page, in the JSON and in the plain output."""
    shared = [r for r in rows if r.claim.reading]
    assert {"cactus-kl-reweighted-target", "mistralrs-2424-greedy-chain"} <= \
        {r.claim.id for r in shared}
    page = claims.markdown(rows)
    for r in shared:
        assert r.to_json()["reading"] == r.claim.reading
    assert page.count("| shared reading |") == len(shared)
    assert all(r.to_json()["reading"] == "" for r in rows if not r.claim.reading)
