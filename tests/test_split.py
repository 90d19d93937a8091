"""The exact engine split into subtree tasks (`spectheory.engine.split`): the same tau pmf, TV, output
and target laws as one process, exactly in rationals (prefix-dependent rows with ties, every
split depth, forward and backward scans, lossless and lossy rules), in float64 to rounding; a
planted bug in the merge is caught; bad splits are refused in one line; the Ray executor agrees."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

import spectheory as st
from spectheory.cli import main
from spectheory.runtime.errors import OptionError, SpectheoryError
from spectheory.engine.nodes import NodeForm, node_verifier
from spectheory.inputs.random_instances import random_instance
from spectheory.verifiers.block import BLOCK_NODE
from spectheory.verifiers.token import TOKEN_NODE
from spectheory.engine import split as split_module


def _halved(form: NodeForm, name: str):
    """A lossy node rule: the form's weights halved below the root (valid weights, wrong law)."""
    def step(state, px, qx, q, p, **kw):
        s, w, c = form.step(state, px, qx, q, p)
        return s, (w if px is None else w / 2), c

    return node_verifier(NodeForm(step, form.scan, "halved " + form.formula), name,
                         lossless=False)


LOSSY_FORWARD = _halved(TOKEN_NODE, "halved-token")
LOSSY_BACKWARD = _halved(BLOCK_NODE, "halved-block")
RULES = ["token", "block", LOSSY_FORWARD, LOSSY_BACKWARD]


def _same(a, b):
    assert a.tau_pmf == b.tau_pmf
    assert a.tv_to_target == b.tv_to_target
    assert list(a.output_law) == list(b.output_law)
    assert list(a.target_law) == list(b.target_law)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: getattr(r, "name", r))
@pytest.mark.parametrize("V, L, seed", [(2, 4, 0), (3, 3, 5)])
def test_split_equals_one_process_exactly(rule, V, L, seed):
    inst = random_instance(V, L, seed, denominator=6)  # coarse rows: ties and zeros
    one = st.analyze(inst, rule, exact=True)
    for depth in range(1, L):
        _same(st.analyze(inst, rule, exact=True, executor="local", split_depth=depth,
                         workers=1), one)
    if getattr(rule, "lossless", True) is False:
        assert one.tv_to_target > 0  # the comparison covers a nonzero TV


def test_split_on_worker_processes_and_context_independent_rows():
    inst = random_instance(3, 4, 7, denominator=10, context_independent=True)
    for rule in ("token", LOSSY_BACKWARD):
        one = st.analyze(inst, rule, exact=True)
        _same(st.analyze(inst, rule, exact=True, executor="local", split_depth=2, workers=2),
              one)


def test_split_in_float64_agrees_to_rounding():
    inst = random_instance(4, 4, 3)
    for rule, workers in zip(RULES, (2, 1, 1, 1)):
        one = st.analyze(inst, rule)
        two = st.analyze(inst, rule, executor="local", split_depth=2, workers=workers)
        assert np.max(np.abs(np.subtract(two.tau_pmf, one.tau_pmf))) < 1e-15
        assert abs(two.tv_to_target - one.tv_to_target) < 1e-14
        assert float(np.abs(two.output_law - one.output_law).max()) < 1e-15


def test_split_without_laws_gives_the_same_numbers():
    inst = random_instance(3, 4, 1, denominator=12)
    one = st.analyze(inst, LOSSY_FORWARD, exact=True, laws=False)
    two = st.analyze(inst, LOSSY_FORWARD, exact=True, laws=False, executor="local",
                     split_depth=1, workers=1)
    assert (two.tau_pmf, two.tv_to_target) == (one.tau_pmf, one.tv_to_target)
    assert two.output_law is None and isinstance(two.tv_to_target, Fraction)


def test_a_wrong_merge_is_caught(monkeypatch):
    """Planted bug: the subtrees' upward values reach the merge 10% low; the tau pmf, which
    the merge builds from them above the split depth, must differ."""
    inst = random_instance(3, 3, 2, denominator=9)
    one = st.analyze(inst, LOSSY_BACKWARD, exact=True)
    first = {"done": False}
    real_run = split_module._run

    def run(fn, args, *rest):
        out = real_run(fn, args, *rest)
        if fn is split_module._phase1 and not first["done"]:
            first["done"] = True
            out = [(sums, up * Fraction(9, 10)) for sums, up in out]  # upward values off by 10%
        return out

    monkeypatch.setattr(split_module, "_run", run)
    two = st.analyze(inst, LOSSY_BACKWARD, exact=True, executor="local", split_depth=1,
                     workers=1)
    assert first["done"] and two.tau_pmf != one.tau_pmf


@pytest.mark.parametrize("kwargs, message", [
    ({"split_depth": 0}, "split_depth = 0 must be an integer in [1, L - 1] = [1, 2]"),
    ({"split_depth": 3}, "split_depth = 3 must be an integer in [1, L - 1]"),
    ({"workers": 0}, "workers=0 must be an integer in [1, "),
    ({"workers": 1.0}, "workers=1.0 must be an integer in [1, "),
    ({"workers": 4 * (os.cpu_count() or 1) + 1}, "must be an integer in [1, "),
    ({"executor": "dask"}, "unknown executor 'dask'"),
])
def test_bad_splits_are_refused(kwargs, message):
    inst = random_instance(2, 3, 0)
    with pytest.raises(OptionError) as exc:
        st.analyze(inst, "block", **{"executor": "local", **kwargs})
    assert message in str(exc.value)


def test_workers_have_one_bound_and_one_message_in_every_entry(tmp_path, capsys):
    """--workers was bounded by 1..4,096 when ``exact`` parsed it and by 4 x the cores in the
    engine and the sweeps (two messages for one option); with a Ray cluster's address it did
    nothing (the cluster's CPUs decide) yet was refused past this machine's cores."""
    top = 4 * (os.cpu_count() or 1)
    inst = tmp_path / "inst.json"
    assert main(["instance", "random", "--vocab", "2", "--block", "3"]) == 0
    inst.write_text(capsys.readouterr().out)
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\n[[instances]]\nfamily = "random"\nvocab = [2]\n'
                     'block = [2]\n[[verifiers]]\nname = ["block"]\n')
    line = (f"--workers {top + 1} must be an integer in [1, {top}] (4 x this machine's "
            f"{top // 4} cores)")
    for argv in (["exact", str(inst), "--executor", "local", "--workers", str(top + 1)],
                 ["sweep", str(sweep), "--workers", str(top + 1), "--out", str(tmp_path / "o")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.endswith(line + "\n") and err.count("\n") == 1, err
    with pytest.raises(OptionError, match=rf"^workers={top + 1} must be an integer in \[1, "):
        st.analyze(random_instance(2, 3, 0), "block", executor="local", workers=top + 1)
    for argv in (["exact", str(inst), "--executor", "ray", "--address", "10.0.0.1:6379",
                  "--workers", "64"],
                 ["sweep", str(sweep), "--executor", "ray", "--address", "10.0.0.1:6379",
                  "--workers", "64", "--out", str(tmp_path / "o")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--workers 64 does nothing with --address " \
            "'10.0.0.1:6379': the Ray cluster's CPUs set how many tasks run at once" in err, err
    with pytest.raises(OptionError, match=r"^workers=64 does nothing with address="):
        st.analyze(random_instance(2, 3, 0), "block", executor="ray", address="10.0.0.1:6379",
                   workers=64)
    assert not (tmp_path / "o").exists()



def test_split_refuses_what_has_no_node_route():
    inst = random_instance(2, 3, 0)
    with pytest.raises(SpectheoryError, match="node-form verifiers with one path only"):
        st.analyze(inst, "gbv", paths=2, executor="local")


def test_split_guards_the_size_of_one_task():
    inst = random_instance(2, 3, 0)
    with pytest.raises(SpectheoryError, match="one subtree task of the split analysis"):
        st.analyze(inst, "block", executor="local", split_depth=1, max_sequences=4)
    # the whole tree (16 sequences) is over the limit, one task below depth 2 (4) is not
    st.analyze(inst, "block", executor="local", split_depth=2, max_sequences=4, workers=1,
               laws=False)


def test_cli_split(tmp_path, capsys):
    path = tmp_path / "inst.json"
    assert main(["instance", "random", "--vocab", "3", "--block", "3", "--seed", "4",
                 "--denominator", "20"]) == 0
    path.write_text(capsys.readouterr().out)
    assert main(["exact", str(path), "--exact", "--json"]) == 0
    one = capsys.readouterr().out
    assert main(["exact", str(path), "--exact", "--json", "--executor", "local",
                 "--split-depth", "2", "--workers", "1"]) == 0
    assert capsys.readouterr().out == one
    assert main(["exact", str(path), "--executor", "local", "--split-depth", "3"]) == 2
    assert "split_depth = 3" in capsys.readouterr().err


def test_ray_executor_equals_one_process_exactly(ray_cluster):
    inst = random_instance(3, 3, 6, denominator=8)
    one = st.analyze(inst, LOSSY_BACKWARD, exact=True)
    _same(st.analyze(inst, LOSSY_BACKWARD, exact=True, executor="ray", split_depth=1,
                     workers=2), one)


def _bad_step(state, px, qx, q, p, **kw):
    """Token verification's step with a weight of 2 at depth 2: not a law."""
    s, w, c = TOKEN_NODE.step(state, px, qx, q, p)
    return s, (w * 2 if px is not None and q is None else w), c


BAD = node_verifier(NodeForm(_bad_step, "forward", "weights of 2 at the last depth"), "bad-node",
                    lossless=False)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_rule_is_named_at_its_place_in_the_whole_tree(workers):
    """Node validation inside a task names the absolute depth and node, as one process does,
    and the error crosses a worker process intact (a LawError, not a broken pool)."""
    from spectheory.law import LawError

    inst = random_instance(2, 2, 3)
    with pytest.raises(LawError) as one:
        st.analyze(inst, BAD)
    with pytest.raises(LawError) as split:
        st.analyze(inst, BAD, executor="local", split_depth=1, workers=workers)
    assert str(split.value) == str(one.value) and split.value.kind == one.value.kind


def test_split_with_laws_guards_the_whole_tree_and_refuses_other_routes():
    inst = random_instance(2, 4, 0)
    with pytest.raises(SpectheoryError, match="laws=True"):
        st.analyze(inst, "block", executor="local", split_depth=3, max_sequences=8, workers=1)
    st.analyze(inst, "block", executor="local", split_depth=3, max_sequences=8, laws=False,
               workers=1)
    with pytest.raises(SpectheoryError, match="route='per-draft'"):
        st.analyze(inst, "block", executor="local", route="per-draft")


def test_a_markov_instance_shallower_than_the_block_splits_to_the_same_law():
    """Depth-1 tables (an order-1 Markov target, a prefix-dependent row after each token) and
    L = 3: the tasks read rows deeper than the tables (the last D tokens of the prefix). Reading
    them by the prefix's leading tokens instead gave token verification [0, 7/20, 9/40, 17/40]
    (right: [0, 7/20, 23/100, 21/50]) with TV 0, the target built from the same wrong rows."""
    from spectheory.inputs.instances import Instance
    from spectheory.inputs.models import TableModel

    F = Fraction

    def model(root, rows):
        return TableModel(2, (np.array([root], dtype=object), np.array(rows, dtype=object)))

    inst = Instance(2, 3, model([F(1, 2), F(1, 2)], [[F(9, 10), F(1, 10)], [F(1, 5), F(4, 5)]]),
                    model([F(1, 2), F(1, 2)], [[F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)]]))
    for rule in ("token", "block"):
        one = st.analyze(inst, rule, exact=True)
        two = st.analyze(inst, rule, exact=True, executor="local", split_depth=1, workers=1)
        _same(one, two)
        assert one.output_law.tolist() == two.output_law.tolist()
    assert st.analyze(inst, "token", exact=True, executor="local", split_depth=2,
                      workers=1).tau_pmf == [0, F(7, 20), F(23, 100), F(21, 50)]


def test_the_task_limit_itself_is_accepted(monkeypatch):
    """V^d tasks equal to MAX_TASKS run (the limit is inclusive); one more power is refused."""
    from spectheory.runtime.errors import SizeLimitError

    monkeypatch.setattr(split_module, "MAX_TASKS", 16)
    inst = random_instance(4, 3, seed=0, denominator=100)
    two = st.analyze(inst, "block", exact=True, laws=False, executor="local", split_depth=2,
                     workers=1)
    assert two.tau_pmf == st.analyze(inst, "block", exact=True, laws=False).tau_pmf
    monkeypatch.setattr(split_module, "MAX_TASKS", 15)
    with pytest.raises(SizeLimitError, match="tasks exceed 15"):
        st.analyze(inst, "block", exact=True, laws=False, executor="local", split_depth=2,
                   workers=1)
