"""The claims ledger (`spectheory claims`): every recomputed verdict equals the one recorded in
the repository (a regression test over all rows), the ledger cites the papers it must, its docs
page is the generated one, and the command line's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

from spectheory.lp import claims

ROOT = Path(__file__).resolve().parents[1]
#: The papers the ledger must cite (seed papers and the multi-draft optimal-transport line).
REQUIRED_SOURCES = ["2403.10444", "2602.16961", "2502.18779", "2410.18234", "2411.05289",
                    "2511.15898", "2604.25925", "2601.05724"]


@pytest.fixture(scope="module")
def rows():
    return claims.run_claims()


def test_every_verdict_is_as_recorded(rows):
    differ = [(r.claim.id, r.finding.verdict, r.claim.recorded) for r in rows if not r.matches]
    assert not differ, f"verdicts that differ from the recorded ones: {differ}"


def test_ledger_size_sources_and_commands(rows):
    assert len(rows) >= 20
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


def test_docs_page_is_the_generated_one(rows):
    page = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    assert page == claims.markdown(rows) + "\n", \
        "docs/claims.md is stale: run `spectheory claims --markdown > docs/claims.md`"


def test_cli_json_only_and_exit_codes(monkeypatch, capsys):
    code, out, err = run(["claims", "--only", "khisti-closed", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [d["id"] for d in data] == ["khisti-closed-form"]
    assert data[0]["verdict"] == data[0]["recorded"] == "confirmed"
    code, out, err = run(["claims", "--only", "no-such-claim"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "matches no claim" in err
    # a verdict that differs from the recorded one: exit 1, the row flagged
    claim = next(c for c in claims.CLAIMS if c.id == "khisti-closed-form")
    changed = [claims.Claim(c.id, c.source, c.claim, "refuted", c.check) if c is claim else c
               for c in claims.CLAIMS]
    monkeypatch.setattr(claims, "CLAIMS", changed)
    code, out, err = run(["claims", "--only", "khisti-closed"], capsys)
    assert code == 1 and "recorded refuted" in out
