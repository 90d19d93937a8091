"""The one verifier protocol: registry, plans and defaults, user verifiers by module:function,
decorator and entry point, and one engine / checker / sampler for 1 and K paths."""

from __future__ import annotations

import sys
import textwrap
from fractions import Fraction

import pytest
import torch

import spectheory as st
from spectheory import registry
from spectheory.runtime.errors import SpectheoryError
from spectheory.law import Law
from spectheory.engine.joint import draft_rows
from spectheory.engine.sampling import sample_drafts
from spectheory.cli.report import toy_instance
from spectheory.sampling import sample_law, sample_output
from spectheory.engine.seqtree import levels
from spectheory.verifiers import BUILTIN, block_verification, gbv

from cli_helpers import run, write


def test_every_builtin_is_registered_once_with_metadata():
    table = st.registered()
    assert [s.name for s in BUILTIN] == [n for n in table if n in {s.name for s in BUILTIN}]
    for spec in BUILTIN:
        assert table[spec.name] is spec
        assert spec.drafting in registry.DRAFTING + ("any",)
        assert spec.paper and spec.summary
    assert {n for n, s in table.items() if not s.lossless} == {
        "uniform-product", "gbv-mismatched-ties", "greedy", "threshold", "lenient", "typical",
        "hsd-released", "spectr-gbv", "additive", "multiplicative", "top-m", "entropy-threshold",
        "trtllm-relaxed", "sglang-threshold", "cactus", "static-ensemble",
        "static-ensemble-greedy", "typical-medusa", "typical-medusa-fast", "cascade-opt",
        "cascade-token-v1", "cascade-token-v2", "cascade-token-v3", "entropy-verify", "ears"}
    assert not table["uniform-product"].exact  # float law only
    assert table["gbv"].order_invariant and not table["specinfer"].order_invariant


def test_plan_defaults_are_decided_once():
    assert registry.plan("block") == (st.registered()["block"], 1, "iid")
    assert registry.plan("traversal", 2).drafting == "norep"  # the verifier's own scheme
    assert registry.plan("gbv", 3).drafting == "iid"
    assert registry.plan("block-first", 2).drafting == "iid"  # "any" defaults to iid
    with pytest.raises(SpectheoryError, match="single-path"):
        registry.plan("block", 2)
    with pytest.raises(SpectheoryError, match="positive integer"):
        registry.plan("gbv", 0)
    with pytest.raises(SpectheoryError, match="drafting"):
        registry.plan("gbv", 2, "bogus")
    with pytest.warns(registry.DraftingWarning, match="designed for iid"):
        registry.plan("gbv", 2, "norep")
    with pytest.raises(SpectheoryError, match="unknown verifier"):
        registry.get_verifier("no-such-verifier")
    with pytest.raises(SpectheoryError, match="module:function"):
        registry.get_verifier(":f")


def test_builtin_function_keeps_its_metadata():
    assert registry.get_verifier(gbv) is st.registered()["gbv"]
    assert registry.get_verifier(block_verification).name == "block"


def test_one_engine_for_one_and_k_paths_exactly():
    inst = toy_instance(exact=True)
    # names, specs and functions give the same analysis
    for v in ("block", st.registered()["block"], block_verification):
        assert st.analyze(inst, v).expected_accepted == Fraction(11, 9)
    assert st.analyze(inst, "gbv", paths=2).block_efficiency == Fraction(212, 81)
    # a K-path verifier at K = 1 goes through the same per-draft route as block verification
    one = st.analyze(inst, "gbv", paths=1)
    assert one.tau_pmf == st.analyze(inst, "block").tau_pmf
    assert one.extra == {"paths": 1, "drafting": "iid"}


def test_multi_iteration_law_for_k_paths_is_lossless_and_catches_lossy():
    # new with the one protocol: repeated iterations of a K-path verifier, exactly
    inst = st.random_instance(2, 2, 3, denominator=6)  # prefix-dependent rows
    rep = st.check_lossless("gbv", inst, n_tokens=5, paths=2)
    assert rep.lossless and rep.n_tokens == 5 and rep.tv == 0 and rep.paths == 2
    tie = st.instance_from_dict({"vocab_size": 2, "block_length": 1, "target": ["1/2", "1/2"],
                                 "draft": ["1/2", "1/2"]}, exact=True)
    bad = st.check_lossless("gbv-mismatched-ties", tie, n_tokens=3, paths=2)
    assert not bad.lossless and bad.n_tokens == 3 and bad.tv > 0


def _user_module(tmp_path, body, name):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))
    return name


def test_user_verifier_by_module_function_and_decorator(tmp_path, capsys):
    mod = _user_module(tmp_path, """
        import spectheory as st
        from spectheory.verifiers import block_verification, gbv

        def my_block(drafts, q, p):          # a bare function: single-path form
            return block_verification(drafts, q, p)

        @st.verifier(paths=None, drafting="iid", summary="GBV, declared by a user")
        def my_gbv(drafts, q, p):
            return gbv(drafts, q, p)

        def my_first_path(drafts, q, p):     # undeclared K-path function
            law = block_verification(drafts[:, 0], q[:, 0], p[:, 0])
            stop = law.stop.new_zeros((drafts.shape[0], drafts.shape[1], law.stop.shape[1]))
            stop[:, 0] = law.stop
            corr = law.correction.unsqueeze(1).expand(-1, drafts.shape[1], -1, -1)
            return st.Law(stop, corr)
    """, "user_verifiers_a")
    try:
        inst = toy_instance(exact=False)
        blk = float(st.analyze(inst, "block").block_efficiency)
        assert float(st.analyze(inst, f"{mod}:my_block").block_efficiency) == pytest.approx(blk)
        spec = registry.get_verifier(f"{mod}:my_gbv")
        assert not spec.single_path and spec.summary == "GBV, declared by a user"
        assert st.analyze(inst, f"{mod}:my_gbv", paths=2).block_efficiency == pytest.approx(
            float(Fraction(212, 81)), abs=1e-12)
        # an undeclared function asked for K > 1 paths is read as K-path
        assert float(st.analyze(inst, f"{mod}:my_first_path", paths=3).block_efficiency) == \
            pytest.approx(blk, abs=1e-12)
        # the command line takes the same names
        path = write(tmp_path, {"vocab_size": 2, "block_length": 2, "target": ["1/3", "2/3"],
                                "draft": ["2/3", "1/3"]})
        code, out, err = run(["check", path, "--verifier", f"{mod}:my_gbv", "--paths", "2",
                              "--exact"], capsys)
        assert code == 0 and "lossless exactly" in out
        code, out, err = run(["exact", path, "--verifier", f"{mod}:missing"], capsys)
        assert code == 2 and "has no attribute" in err and out == ""
        code, out, err = run(["exact", path, "--verifier", "no_such_module_xyz:f"], capsys)
        assert code == 2 and "cannot import" in err and out == ""
    finally:
        sys.path.remove(str(tmp_path))


def test_entry_point_group(tmp_path, monkeypatch):
    mod = _user_module(tmp_path, """
        from spectheory.verifiers import token_verification

        def plugged(drafts, q, p):
            return token_verification(drafts, q, p)
    """, "user_verifiers_b")
    dist = tmp_path / "plugged_verifier-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-verifier\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[spectheory.verifiers]\nplugged = {mod}:plugged\n")
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    try:
        assert "plugged" in registry.registered()
        inst = toy_instance(exact=True)
        assert st.analyze(inst, "plugged").expected_accepted == Fraction(10, 9)
    finally:
        registry._REGISTRY.pop("plugged", None)
        sys.path.remove(str(tmp_path))


def test_verifiers_command_lists_the_registry(capsys):
    import json

    code, out, _ = run(["verifiers", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and {r["name"] for r in rows} >= {s.name for s in BUILTIN}
    assert {r["name"]: r["paths"] for r in rows}["gbv"] == "any"


def test_one_sampler_for_both_forms():
    """sample_output on the single-path form draws what sample_law drew, and on a K-path law
    with K = 1 the very same draws (same uniforms)."""
    inst = st.random_instance(3, 3, 1)  # prefix-dependent rows
    gen = torch.Generator().manual_seed(0)
    drafts = sample_drafts(inst, 1, 500, generator=gen)  # [n, 1, L]
    q, p = draft_rows(levels(inst.draft, 0, 3, False), levels(inst.target, 0, 4, False),
                      drafts, 3, 3)
    u = torch.rand(500, 2, generator=gen, dtype=torch.float64)
    single = block_verification(drafts[:, 0], q[:, 0], p[:, 0])
    k_form = st.registered()["block"].law(drafts, q, p)
    tau1, y1 = sample_law(single, uniforms=u)
    k2, tau2, y2 = sample_output(k_form, uniforms=u)
    assert torch.equal(tau1, tau2) and torch.equal(y1, y2) and int(k2.abs().sum()) == 0
    assert isinstance(k_form, Law) and k_form.has_path_axis and not single.has_path_axis
