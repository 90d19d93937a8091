"""`spectheory report` is a check: every comparison it prints is counted, it ends with one verdict
line, and a planted failure makes it exit 1."""

from __future__ import annotations

import re
import subprocess
import sys

from spectheory.lp import report as _lp_report  # noqa: F401
from spectheory.cli import report
from spectheory.cli import main
from spectheory.law import Law
from spectheory.registry import DRAFTING_MAX_PATHS
from spectheory.verifiers import MULTI_PATH, SINGLE_PATH, block_verification

VERDICT = re.compile(r"^(\d+) checks, (all passed|(\d+) FAILED: (.*))$")


def run_report(capsys, *args):
    code = main(["report", *args])
    out = capsys.readouterr().out
    return code, out, out.rstrip("\n").splitlines()[-1]


def optimum_checks() -> int:
    """Checks of one optimum row per drafting scheme: no verifier above it at each K = 1, 2, 3
    the scheme defines (``hub``: K <= 2), and attained at K = 1."""
    draftings = {s.default_drafting for s in MULTI_PATH.values()}
    return sum(len([K for K in (1, 2, 3) if K <= DRAFTING_MAX_PATHS.get(d, K)]) + 1
               for d in draftings)


def expected_count() -> int:
    """One check per comparison the sections print (see each section)."""
    toy = len(SINGLE_PATH) + len(report.TOY_PUBLISHED) + 1  # lossless each, published E[tau], 6 tokens
    rand = 5 * 3 + 3  # per random instance: token lossless, block lossless, block >= token
    wrong = 1  # the lossy variant caught
    lp_section = 5  # node-budget = block (exact, float), direct K = 1 = block, K = 2 >= K = 1, bound
    multipath = len(MULTI_PATH) + optimum_checks() + 2  # lossless each; the optimum rows; the
    # tie control and GBV
    stateful = 2 * 2 + 1 + 3  # token and block under two parameter sets; the product-of-uniforms
    # control caught; the grammar mask's block lossless, token lossless, block >= token
    return toy + rand + wrong + lp_section + multipath + stateful


def test_report_passes_and_counts_every_comparison(capsys):
    code, out, last = run_report(capsys)
    m = VERDICT.match(last)
    assert code == 0 and m and m.group(2) == "all passed", last
    assert int(m.group(1)) == expected_count()
    # the printed verdicts of the comparisons: none says FAILED / DIFFERENT / NO
    assert "FAILED" not in out and "DIFFERENT" not in out and ": NO" not in out
    assert "E[tau] = 10/9" in out and "published 11/9: equal" in out
    assert "caught by the checker: yes" in out and "gbv-mismatched-ties: LOSSY" in out
    # the multi-path table: every verifier row has one cell per K column ("-" where its scheme
    # defines no such K: SpecHub's hub drafting stops at K = 2), then the max TV and the verdict
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.strip().startswith("verifier") and
                "K = 1" in ln)
    Ks = lines[head].count("K = ")
    rows = []
    for ln in lines[head + 1:]:  # the table: the rows right below its header
        if not ln.split() or ln.split()[0] not in MULTI_PATH:
            break
        rows.append(ln.split())
    assert len(rows) == len(MULTI_PATH)
    for cells in rows:
        assert len(cells) == 2 + Ks + 2, cells
        assert cells[-1] == "yes" and float(cells[-2]) <= 1e-12
    hub = next(c for c in rows if c[1] == "hub")
    assert hub[2 + 2:2 + Ks] == ["-"] * (Ks - 2)


def resample_from_target(drafts, q, p):
    """Block verification with a classic bug: after a rejection it resamples from the target
    row p instead of the residual, so the output law is no longer the target's."""
    law = block_verification(drafts, q, p)
    return Law(law.stop, p)


def test_planted_lossy_block_verification_fails_the_report(capsys, monkeypatch):
    """The multi-iteration check runs `spectheory.verifiers.block_verification` (imported when
    the section runs); swap in a lossy variant and the report must fail that check, and only
    that one."""
    import spectheory.verifiers

    monkeypatch.setattr(spectheory.verifiers, "block_verification", resample_from_target)
    code, out, last = run_report(capsys)
    m = VERDICT.match(last)
    assert code == 1 and m and m.group(3) == "1", last
    assert int(m.group(1)) == expected_count()
    assert m.group(4) == "block lossless over 6 tokens of repeated iterations"
    assert "block, 6 tokens over repeated iterations: LOSSY" in out


def test_optimum_below_a_verifier_fails_the_report(capsys, monkeypatch):
    """An 'optimum' 1% too low is beaten by the verifiers and not attained at K = 1."""
    real = _lp_report.direct_optimum
    monkeypatch.setattr(_lp_report, "direct_optimum", lambda inst, K, d: 0.99 * real(inst, K, d))
    code, out, last = run_report(capsys)
    assert code == 1 and "FAILED" in last
    assert "LP optimum (iid, K = 1) >= every verifier" in last
    assert "LP optimum (norep, K = 3) attained" not in last  # only K = 1 is checked attained
    assert "attained at K = 1: FAILED" in out


def test_checks_verdict_lists_the_failures():
    checks = report.Checks()
    assert checks("a", True) is True and checks("b", 0) is False and checks("c", False) is False
    assert checks.failed == ["b", "c"]
    assert checks.verdict() == "3 checks, 2 FAILED: b; c"
    ok = report.Checks()
    ok("x", True)
    assert ok.verdict() == "1 check, all passed"


def test_sections_are_added_once_in_place():
    before = list(report.SECTIONS)
    try:
        _lp_report.contribute()
        _lp_report.contribute()
        keys = [s.key for s in report.SECTIONS]
        assert keys.count("lp") == 1 and keys.index("lp") == keys.index("multipath") - 1
        report.add_section(report.Section("extra", "Extra", lambda args, checks: []))
        assert [s.key for s in report.SECTIONS][-1] == "extra"
    finally:
        report.SECTIONS[:] = before


def test_core_loads_no_outer_package():
    code = ("import sys, spectheory, spectheory.cli.report, spectheory.cli.figures, spectheory.cli.commands; "
            "print(sorted(m for m in sys.modules "
            "if m.split('.')[:2] in (['spectheory', 'lp'], ['spectheory', 'toy_models'], ['spectheory', 'gpu_validation'])))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr


def test_core_report_alone_has_no_lp_rows(monkeypatch):
    """Without the lp package's contributions the core sections still run and check."""
    import argparse

    monkeypatch.setattr(report, "MULTIPATH_OPTIMA", {})
    monkeypatch.setattr(report, "SECTIONS", [s for s in report.SECTIONS if s.key != "lp"])
    monkeypatch.setattr(report, "CONTRIBUTORS", ())
    lines, checks = report.run_report(argparse.Namespace(seed=0))
    text = "\n".join(lines)
    assert "LP optimum" not in text and "node-budget" not in text
    assert len(checks.results) == expected_count() - 5 - optimum_checks()
    assert not checks.failed


def test_the_report_command_loads_the_lp_section_by_itself(tmp_path):
    """``spectheory report`` in a fresh process: the command line imports only the report's own
    module, and the report loads the LP section by module name (every check counted)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "spectheory", "report"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last == f"{expected_count()} checks, all passed", last
    assert "node-budget" in out.stdout
