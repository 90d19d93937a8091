"""The real-model validation run (``spectheory validate run``): resumable, one JSON per prompt,
and the per-forward cost measurement (``spectheory validate costs``).

For each prompt: prefill, then iterate until ``max_new_tokens`` are generated. Every iteration
drafts K_max i.i.d. paths of L_max tokens, runs the target once over them, evaluates every
verifier at every (K <= K_max, L in Ls) on prefixes of that batch
(`spectheory.gpu_validation.compare.paired_step`), and advances the trajectory with the ``advance``
verifier at (K_max, L_max) (single-path: path 0). Results go to
``OUT/prompts/<dataset>-<index>.json`` (written atomically when the prompt is done); a restarted
run skips the prompts already written. ``OUT/run.json`` holds the configuration and a restart
with a different configuration is refused. ``OUT/costs.json`` holds measured per-forward costs
(the inputs of the cost model in `summarize`).

**Several GPUs.** With ``executor="local"`` or ``"ray"`` the prompts are shared out among
``workers`` model replicas: local worker processes (worker i on ``cuda:i`` with device ``cuda``)
or Ray actors (`spectheory.runtime.raycluster.ray_actors`: one GPU, or one CPU, each). Each replica loads
the pair once; the driver hands out the prompts one at a time in the order of the single-process
loop, to whichever replica is free, and writes each returned record itself, so the folder is
exactly as resumable as a single-process run's. The driver writes ``run.json`` before any worker
starts and asks worker 0 alone for the cost measurements, while the others wait (before the first
prompt and after the last). Every prompt's draws come from its own generator, seeded by the seed
and the prompt (`hash_prompt`), never from a stream shared across prompts: a prompt's record does
not depend on which replica ran it or in what order, and equals the single-process record up to
its timings. (The arithmetic is the single-process run's on the same kind of GPU; on the CPU every
worker runs with the driver's torch thread count, ``spectheory --threads``, since a matrix product
may round differently with another count: on the CPU keep threads x workers within the cores.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import torch

from spectheory.engine.split import EXECUTORS
from spectheory.runtime.errors import SpectheoryError

from ..atomic import write_json
from ..checks import check_choice, check_float, check_int, check_seed
from ..compare import paired_step
from ..data import format_datasets, parse_datasets
from ..decoding import (SamplingConfig, SpeculativeDecoder, check_memory, law_on,
                        resolve_verifier, sample_on)
from ..forward_costs import machine_info, measure_costs
from ..hf_models import ModelSpec
from .config import DEFAULT_OUT, check_out_folder, stderr_log

RESULT_KEYS = ("draft", "target", "datasets", "seed", "max_new_tokens", "K", "Ls", "advance",
               "temperature", "top_k", "top_p", "dtype", "max_prompt_tokens", "verifiers")

#: Verifiers of the default run: single-path token/block, and the multi-path ones that are
#: lossless under i.i.d. drafting (the drafting of the loop). SpecTr is left out for its cost at
#: V = 151,936 (seconds per law on 2 CPU cores); norep-drafting verifiers (specinfer-norep,
#: traversal) need another drafting scheme; block-first/token-first duplicate block/token.
DEFAULT_VERIFIERS = ("token", "block", "gbv", "specinfer", "traversal-iid")

MAX_PATHS = 1024
MAX_LENGTH = 1024
MAX_TOKENS = 1_000_000
#: Most model replicas of a sharded run on Ray (the cluster's GPUs or CPUs bound it further).
MAX_RAY_WORKERS = 4096
#: Replicas of a sharded run on the CPU when ``workers`` is not given (each holds the pair).
CPU_WORKERS = 2


def _block_lengths(Ls) -> tuple:
    """The distinct block lengths of a non-empty sequence, sorted, each in 1..MAX_LENGTH."""
    if isinstance(Ls, (str, int)) or not Ls:
        raise SpectheoryError(f"Ls must be a non-empty sequence of block lengths, got {Ls!r}")
    return tuple(sorted({check_int("L", x, 1, MAX_LENGTH) for x in Ls}))


def _datasets(value) -> tuple:
    return parse_datasets(value) if isinstance(value, str) else parse_datasets(
        format_datasets(value))


@dataclass(frozen=True)
class RunConfig:
    """Configuration of `validate_run` (checked on construction, one-line errors).

    Parameters
    ----------
    out : str
        Output folder (resumable).
    models : ModelSpec
        The draft/target pair, device and dtype.
    sampling : SamplingConfig
        Temperature, top-k, top-p (applied to draft and target alike).
    datasets : str or tuple
        ``"humaneval:30,sharegpt:30"`` or its parsed form (:func:`gpu_validation.data.
        parse_datasets`); stored parsed.
    max_new_tokens : int
        Tokens generated per prompt.
    K : int
        Paths drafted per iteration (every K' <= K is evaluated on a prefix of them).
    Ls : tuple of int
        Block lengths evaluated (drafted at the largest).
    verifiers : tuple of str
        Names or ``module:function`` of the verifiers compared.
    advance : str
        The verifier whose sample advances the trajectory (at K, max Ls).
    max_prompt_tokens : int
        Prompts are cut to their last ``max_prompt_tokens`` tokens.
    costs : bool
        Measure per-forward costs (OUT/costs.json, and costs_final.json at the end).
    cost_reps : int
        Repetitions per cost measurement (median).
    seed : int
        Seed of the prompt subset and of every draw.
    memory_limit_gib : float
        Refuse (before loading) a drafted batch estimated above this size.
    executor : str or None
        None: one process runs every prompt (the default). ``"local"``: ``workers`` worker
        processes on this machine (with device ``cuda``, worker i on ``cuda:i``); ``"ray"``:
        ``workers`` Ray actors, each holding one GPU (device ``cuda``) or one CPU.
    workers : int or None
        Model replicas of a sharded run; default one per GPU (local: this machine's; Ray: the
        cluster's) with device ``cuda``, else `CPU_WORKERS`.
    address : str or None
        Ray: the address of a running cluster; without it a local Ray cluster is started.
    """

    out: str = DEFAULT_OUT
    models: ModelSpec = field(default_factory=ModelSpec)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    datasets: tuple = (("humaneval", 30), ("sharegpt", 30))
    max_new_tokens: int = 64
    K: int = 4
    Ls: tuple = (4, 8)
    verifiers: tuple = DEFAULT_VERIFIERS
    advance: str = "gbv"
    max_prompt_tokens: int = 512
    costs: bool = True
    cost_reps: int = 3
    seed: int = 0
    memory_limit_gib: float = 16.0
    executor: str | None = None
    workers: int | None = None
    address: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "datasets", _datasets(self.datasets))
        _check_executor(self.executor, self.workers, self.address, self.models.device)
        check_int("max new tokens", self.max_new_tokens, 1, MAX_TOKENS)
        check_int("K", self.K, 1, MAX_PATHS)
        object.__setattr__(self, "Ls", _block_lengths(self.Ls))
        check_int("max prompt tokens", self.max_prompt_tokens, 1, MAX_TOKENS)
        check_int("cost reps", self.cost_reps, 1, 1000)
        check_seed(self.seed)
        check_float("memory limit (GiB)", self.memory_limit_gib, 0, None, lo_open=True)
        check_out_folder(self.out)
        if isinstance(self.verifiers, str) or not self.verifiers:
            raise SpectheoryError("verifiers must be a non-empty sequence of names")
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        if len(set(self.verifiers)) != len(self.verifiers):
            raise SpectheoryError(f"a verifier is listed twice: {', '.join(self.verifiers)}")
        specs = self.specs()
        resolve_verifier(self.advance)
        multi = [n for n, s in specs.items() if not s.single_path]
        if multi and self.K < 2:
            raise SpectheoryError(
                f"K-path verifier(s) {', '.join(multi)} are compared at K >= 2 only; use K >= 2 "
                "or single-path verifiers (token, block)")

    def specs(self) -> dict:
        """name -> VerifierSpec of the compared verifiers."""
        return {n: resolve_verifier(n) for n in self.verifiers}

    def record(self) -> dict:
        """The fields stored in OUT/run.json and compared on a restart."""
        return {"draft": self.models.draft_path() or
                f"first {self.models.draft_layers} layers of the target",
                "target": self.models.target_path(), "datasets": format_datasets(self.datasets),
                "seed": self.seed, "max_new_tokens": self.max_new_tokens, "K": self.K,
                "Ls": list(self.Ls), "advance": self.advance,
                "temperature": self.sampling.temperature, "top_k": self.sampling.top_k,
                "top_p": self.sampling.top_p, "dtype": self.models.dtype,
                "max_prompt_tokens": self.max_prompt_tokens, "verifiers": list(self.verifiers)}


def _check_executor(executor, workers, address, device: str) -> None:
    """The sharding options, each refused in one line."""
    if executor is None:
        if workers is not None or address is not None:
            raise SpectheoryError("--workers and --address shard the run; give them with "
                                  "--executor local or --executor ray")
        return
    check_choice("executor", executor, EXECUTORS)
    cuda = device.startswith("cuda")
    if cuda and device != "cuda":
        raise SpectheoryError(f"--executor {executor} gives each worker its own GPU; use "
                              f"--device cuda, not {device}")
    if executor == "local":
        if address is not None:
            raise SpectheoryError("--address names a Ray cluster; use it with --executor ray")
        cores = os.cpu_count() or 1
        if workers is not None:
            check_int("workers", workers, 1, 4 * cores)
        if cuda and workers is not None and workers > torch.cuda.device_count():
            raise SpectheoryError(f"--workers {workers} is more than the "
                                  f"{torch.cuda.device_count()} CUDA device(s) of this machine "
                                  "(worker i runs on cuda:i)")
    elif workers is not None:
        check_int("workers", workers, 1, MAX_RAY_WORKERS)
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise SpectheoryError(f"--address must be a Ray cluster address, got {address!r}")


def run_prompt(decoder: SpeculativeDecoder, prompt_ids, verifiers: dict, advance, K: int,
               Ls, max_new_tokens: int, generator: torch.Generator, log=None) -> dict:
    """Generate ``max_new_tokens`` from one prompt; at every iteration record the paired
    comparison of ``verifiers`` (name -> VerifierSpec) at every (K' <= K, L in Ls) and advance
    with the spec ``advance`` at (K, max Ls). Returns the per-prompt JSON record."""
    Lmax = max(Ls)
    Ks = list(range(1, K + 1))
    t_start = time.perf_counter()
    decoder.start(prompt_ids)
    steps, new = [], []
    while len(new) < max_new_tokens:
        prop = decoder.propose(K, Lmax, generator)
        u = torch.rand(1, 2, generator=generator, dtype=torch.float64)
        paired = paired_step(prop, verifiers, Ks, Ls, u)
        t0 = time.perf_counter()
        law = law_on(advance, prop, path=0)
        k, tau, y = sample_on(law, uniforms=u.to(prop.p.device), path=0)
        t_verify = time.perf_counter() - t0
        steps.append({"ctx": len(decoder.tokens), "draft_s": prop.draft_seconds,
                      "target_s": prop.target_seconds, "verify_s": t_verify,
                      "advance": [k, tau, y], **paired})
        new.extend(decoder.commit(prop, k, tau, y))
        if log is not None:
            log(f"  step {len(steps)}: draft {prop.draft_seconds:.1f}s target "
                f"{prop.target_seconds:.1f}s laws {sum(paired['law_s'].values()):.1f}s "
                f"tau {tau} tokens {len(new)}")
    return {"prompt_tokens": len(prompt_ids), "new_tokens": new, "steps": steps,
            "wall_s": time.perf_counter() - t_start}


def hash_prompt(p) -> int:
    """A stable per-prompt seed offset (not Python's salted hash)."""
    h = 0
    for ch in f"{p.dataset}:{p.index}":
        h = (h * 131 + ord(ch)) % 1_000_000_007
    return h


def _check_restart(out: Path, cfg: dict) -> dict:
    run_file = out / "run.json"
    if not run_file.exists():
        return cfg
    try:
        old = json.loads(run_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpectheoryError(f"{run_file} is unreadable ({type(exc).__name__}); use another "
                              "--out") from None
    diff = [k for k in RESULT_KEYS if k != "verifiers" and old.get(k) != cfg.get(k)]
    if diff:
        raise SpectheoryError(f"{out} holds a run with another configuration "
                              f"({', '.join(diff)} differ); use another --out")
    missing = [v for v in cfg["verifiers"] if v not in old.get("verifiers", [])]
    if missing:
        raise SpectheoryError(f"{out} was started without verifier(s) {', '.join(missing)}; use "
                              "another --out")
    return {**cfg, "verifiers": [v for v in old["verifiers"] if v in cfg["verifiers"]]}


def _prompt_record(cfg: RunConfig, decoder: SpeculativeDecoder, tok, verifiers: dict, advance,
                   p, log=None, label: str = "") -> dict:
    """The per-prompt JSON record of prompt ``p``: its generator is seeded by the seed and the
    prompt alone (`hash_prompt`), so the record does not depend on what ran before it."""
    from ..data import encode

    ids = encode(p, tok, cfg.max_prompt_tokens)
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + hash_prompt(p))
    if log is not None:
        log(f"{label}{p.dataset}-{p.index}: {len(ids)} prompt tokens")
    res = run_prompt(decoder, ids, verifiers, advance, cfg.K, cfg.Ls, cfg.max_new_tokens, g,
                     log=log)
    res.update({"dataset": p.dataset, "index": p.index, "id": p.id})
    if tok is not None:
        res["text"] = tok.decode(res["new_tokens"])
    res["loadavg"] = os.getloadavg()
    return res


def _cost_record(cfg: RunConfig, pair, prompt, device: str, reps: int, log=None) -> dict:
    """Per-forward costs of the loaded ``pair`` at ``prompt`` (`measure_costs`), with the machine
    and the load average."""
    from ..data import encode

    ids = encode(prompt, pair.tokenizer, cfg.max_prompt_tokens)
    c = measure_costs(pair.draft, pair.target, ids, list(range(1, cfg.K + 1)), list(cfg.Ls),
                      device, reps=reps, log=log)
    c["machine"] = machine_info(device)
    c["loadavg"] = os.getloadavg()
    return c


def _prompt_file(out: Path, p) -> Path:
    return out / "prompts" / f"{p.dataset}-{p.index}.json"


def _done_line(p, res: dict) -> str:
    return (f"{p.dataset}-{p.index}: {len(res['steps'])} steps, {res['wall_s']:.0f}s, "
            f"realised tokens/step {len(res['new_tokens']) / len(res['steps']):.2f}")


def validate_run(cfg: RunConfig, log=stderr_log) -> dict:
    """Run (or resume) the validation run of ``cfg``; returns {"prompts", "done", "out"}.

    Every check (files, vocabularies, memory, restart compatibility, data sets present) runs
    before the models are loaded and before anything is written. With ``cfg.executor`` the
    prompts are shared out among model replicas (module docstring, "Several GPUs")."""
    from ..data import load_prompts
    from ..hf_models import load_models

    out = Path(cfg.out)
    V = cfg.models.check()
    check_memory(cfg.K, max(cfg.Ls), V, cfg.memory_limit_gib, "--K and --L")
    record = _check_restart(out, cfg.record())
    prompts = load_prompts(cfg.datasets, cfg.seed)
    todo = [p for p in prompts if not _prompt_file(out, p).exists()]
    asked = sum(count for _, count in cfg.datasets if count)
    fewer = (f" (of {asked:,} asked: the data sets hold no more)"
             if asked and len(prompts) < asked else "")
    log(f"{len(prompts)} prompts{fewer}, {len(prompts) - len(todo)} already done, output {out}")
    result = {"prompts": len(prompts), "done": len(prompts) - len(todo), "out": str(out)}
    if not todo and (not cfg.costs or (out / "costs_final.json").exists()):
        return result
    if cfg.executor is not None:
        _sharded(cfg, record, prompts, todo, result, log)
        return result
    pair = load_models(cfg.models)
    log(f"models loaded in {pair.load_seconds['draft'] + pair.load_seconds['target']:.0f}s")
    tok = pair.tokenizer
    existed = out.exists()
    wrote = [] if (out / "run.json").exists() else [out / "run.json"]
    if wrote:
        write_json(out / "run.json", {**record, "machine": machine_info(cfg.models.device),
                                      "load_seconds": pair.load_seconds})
    try:
        return _single(cfg, out, record, prompts, todo, result, pair, tok, wrote, log)
    except BaseException:
        # nothing of this run kept (its first prompt failed: a verifier that raised, models
        # that cannot run together): what it wrote goes, so that the corrected command can
        # start in the same folder instead of being refused as another configuration
        if result["done"] == len(prompts) - len(todo):
            import shutil

            if not existed:
                shutil.rmtree(out, ignore_errors=True)
            else:
                for f in wrote:
                    f.unlink(missing_ok=True)
        raise


def _single(cfg, out, record, prompts, todo, result, pair, tok, wrote, log) -> dict:
    """The prompts of ``todo`` in this process (`run_experiment`); ``wrote`` collects the files
    this run wrote before its first prompt."""
    decoder = SpeculativeDecoder(pair.draft, pair.target, cfg.sampling, torch.float64,
                                 cfg.models.device)
    verifiers = {n: resolve_verifier(n) for n in record["verifiers"]}
    advance = resolve_verifier(cfg.advance)

    def costs(name: str, reps: int) -> None:
        write_json(out / name, _cost_record(cfg, pair, prompts[0], cfg.models.device, reps,
                                            log=log))
        log(f"{name} written")

    if cfg.costs and not (out / "costs.json").exists():
        wrote.append(out / "costs.json")
        costs("costs.json", cfg.cost_reps)
    for i, p in enumerate(todo, 1):
        res = _prompt_record(cfg, decoder, tok, verifiers, advance, p, log=log,
                             label=f"[{i}/{len(todo)}] ")
        write_json(_prompt_file(out, p), res)
        result["done"] += 1
        log(_done_line(p, res))
    if cfg.costs and not (out / "costs_final.json").exists():
        # Measured again once every prompt is done, with more repetitions: the start of a run is
        # often its busiest moment. The summary prefers these.
        costs("costs_final.json", max(5, cfg.cost_reps))
    return result


# ----------------------------------------------------------------------------- several GPUs


class Replica:
    """One model replica of a sharded run (a local worker process or a Ray actor): loads the pair
    of ``cfg`` once on ``device``, then runs the prompts it is sent and returns their records,
    which the driver writes.

    Parameters
    ----------
    cfg : RunConfig
        The run (its device is replaced by ``device``).
    verifiers : list of str
        The verifiers compared (those of ``run.json`` on a resumed run).
    index : int
        The worker's number (0 measures the costs).
    device : str
        ``cpu``, ``cuda`` (a Ray actor: the GPU Ray gave it) or ``cuda:i``.
    threads : int or None
        Torch's CPU threads in this process (the driver's; None: left as they are).
    """

    def __init__(self, cfg: RunConfig, verifiers, index: int, device: str, threads=None):
        from ..hf_models import load_models

        if threads is not None:
            from spectheory.runtime.threads import set_threads

            set_threads(threads)
        self.cfg = cfg
        self.device = device
        self.pair = load_models(dataclasses.replace(cfg.models, device=device))
        self.decoder = SpeculativeDecoder(self.pair.draft, self.pair.target, cfg.sampling,
                                          torch.float64, device)
        self.verifiers = {n: resolve_verifier(n) for n in verifiers}
        self.advance = resolve_verifier(cfg.advance)
        self.info = {"index": index, "host": platform.node(), "pid": os.getpid(),
                     "device": device}
        if device.startswith("cuda"):
            self.info["gpu"] = torch.cuda.get_device_name(torch.device(device))

    def ready(self) -> dict:
        """Who this replica is (index, host, process, device) and its load times."""
        return {**self.info, "load_seconds": self.pair.load_seconds}

    def prompt(self, p) -> dict:
        """The record of prompt ``p`` (`_prompt_record`), with ``worker`` naming this replica."""
        res = _prompt_record(self.cfg, self.decoder, self.pair.tokenizer, self.verifiers,
                             self.advance, p)
        res["worker"] = self.info
        return res

    def costs(self, prompt, reps: int) -> dict:
        """Per-forward costs at ``prompt`` on this replica's device."""
        return _cost_record(self.cfg, self.pair, prompt, self.device, reps)


def _describe(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # a Ray task error carries the worker's exception
    exc = cause if isinstance(cause, BaseException) else exc
    text = " ".join(str(exc).split())
    if not isinstance(exc, SpectheoryError):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 300 else text[:297] + "..."


def _serve(conn, replica_args, others) -> None:  # pragma: no cover - runs in the worker process
    """A local worker: build the `Replica`, then answer (method, args) messages until None."""
    for c in others:  # the driver's ends of the other workers' pipes, inherited by a fork
        c.close()
    try:
        replica = Replica(*replica_args)
        conn.send(("ok", replica.ready()))
    except BaseException as exc:  # noqa: BLE001 - reported to the driver as one line
        conn.send(("error", _describe(exc)))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the driver is gone
            return
        if msg is None:
            return
        method, margs = msg
        try:
            answer = ("ok", getattr(replica, method)(*margs))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver as one line
            answer = ("error", _describe(exc))
        conn.send(answer)


class _WorkerFailed(Exception):
    def __init__(self, index: int, text: str):
        super().__init__(text)
        self.index = index


class _LocalPool:
    """``n`` worker processes, each serving one `Replica` over a pipe. Forked on the CPU (fast);
    started fresh (spawn) with CUDA, which a forked child cannot use once the parent touched it."""

    def __init__(self, replica_args, spawn: bool):
        import multiprocessing as mp

        ctx = mp.get_context("spawn" if spawn else "fork")
        self.conns, self.procs, self.busy = [], [], set()
        for one in replica_args:
            mine, theirs = ctx.Pipe()
            # a forked child closes the driver's ends it inherited (its own pipe's included), so
            # that it sees the driver's end as an end of file
            inherited = [] if spawn else [*self.conns, mine]
            proc = ctx.Process(target=_serve, args=(theirs, one, inherited), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)
            self.busy.add(len(self.procs) - 1)  # building its replica

    def submit(self, i: int, method: str, *values) -> None:
        self.conns[i].send((method, values))
        self.busy.add(i)

    def next(self):
        """(worker, answer) of the next worker to answer; `_WorkerFailed` on its error or end."""
        from multiprocessing.connection import wait

        while True:
            for i in sorted(self.busy):
                if self.conns[i].poll():
                    try:
                        status, value = self.conns[i].recv()
                    except (EOFError, OSError):  # the process ended: its pipe is closed
                        self.procs[i].join(timeout=5)
                        raise _WorkerFailed(i, f"the worker process ended with exit code "
                                               f"{self.procs[i].exitcode}") from None
                    self.busy.discard(i)
                    if status == "error":
                        raise _WorkerFailed(i, value)
                    return i, value
            for i in sorted(self.busy):
                if not self.procs[i].is_alive() and not self.conns[i].poll():
                    self.procs[i].join()
                    raise _WorkerFailed(i, f"the worker process ended with exit code "
                                           f"{self.procs[i].exitcode}")
            wait([self.conns[i] for i in self.busy] +
                 [self.procs[i].sentinel for i in self.busy], timeout=1.0)

    def close(self, wait_s: float) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=wait_s)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for c in self.conns:
            c.close()


class _RayPool:
    """``n`` Ray actors (`spectheory.runtime.raycluster.ray_actors`), one `Replica` each."""

    def __init__(self, ray, replica_args, gpu: bool):
        from spectheory.runtime.raycluster import ray_actors

        self.ray = ray
        self.actors = ray_actors(ray, Replica, replica_args, gpu=gpu, what="--executor ray")
        self.refs = {a.ready.remote(): i for i, a in enumerate(self.actors)}

    def submit(self, i: int, method: str, *values) -> None:
        self.refs[getattr(self.actors[i], method).remote(*values)] = i

    def next(self):
        ready, _ = self.ray.wait(list(self.refs), num_returns=1)
        i = self.refs.pop(ready[0])
        try:
            return i, self.ray.get(ready[0])
        except Exception as exc:  # noqa: BLE001 - a failed call or a lost actor
            raise _WorkerFailed(i, _describe(exc)) from None

    def close(self, wait_s: float) -> None:
        for a in self.actors:
            self.ray.kill(a)


def _workers(cfg: RunConfig, ray=None) -> int:
    """The replicas asked for: ``cfg.workers``, else one per GPU with CUDA, else `CPU_WORKERS`."""
    if cfg.workers is not None:
        return cfg.workers
    if not cfg.models.device.startswith("cuda"):
        return CPU_WORKERS
    if ray is not None:
        return int(ray.cluster_resources().get("GPU", 0))
    return torch.cuda.device_count()


def _sharded(cfg: RunConfig, record: dict, prompts: list, todo: list, result: dict,
             log) -> None:
    """The prompts of ``todo`` on ``cfg.workers`` replicas (module docstring): run.json first,
    worker 0 measures the costs while the others wait, each returned record written at once."""
    from contextlib import ExitStack

    from spectheory.runtime.threads import get_threads

    out = Path(cfg.out)
    cuda = cfg.models.device.startswith("cuda")
    with ExitStack() as stack:
        ray = None
        if cfg.executor == "ray":
            from spectheory.runtime.raycluster import ray_session

            ray = stack.enter_context(ray_session(_workers(cfg), cfg.address,
                                                  what="--executor ray"))
        n = max(1, min(_workers(cfg, ray), len(todo)))
        if ray is not None:  # before anything is written
            from spectheory.runtime.raycluster import check_ray_resources

            check_ray_resources(ray, n, cuda, "--executor ray")
        if not (out / "run.json").exists():
            write_json(out / "run.json", {**record, "machine": machine_info(cfg.models.device),
                                          "executor": {"name": cfg.executor, "workers": n}})
        # every worker computes with the driver's CPU threads: the single-process arithmetic
        threads = get_threads()
        if cfg.executor == "local":
            replicas = [(cfg, record["verifiers"], i, f"cuda:{i}" if cuda else "cpu", threads)
                        for i in range(n)]
            pool = _LocalPool(replicas, spawn=cuda)
        else:
            replicas = [(cfg, record["verifiers"], i, "cuda" if cuda else "cpu", threads)
                        for i in range(n)]
            pool = _RayPool(ray, replicas, gpu=cuda)
        log(f"{n} worker(s) ({cfg.executor}) loading the models")
        running: dict[int, object] = {}
        clean = False
        try:
            for _ in range(n):
                i, info = pool.next()
                where = f"{info['device']}" + (f" ({info['gpu']})" if "gpu" in info else "")
                log(f"worker {i} ready on {info['host']} {where}, models loaded in "
                    f"{sum(info['load_seconds'].values()):.0f}s")

            def costs(name: str, reps: int) -> None:
                pool.submit(0, "costs", prompts[0], reps)
                write_json(out / name, pool.next()[1])
                log(f"{name} written (worker 0)")

            if cfg.costs and not (out / "costs.json").exists():
                costs("costs.json", cfg.cost_reps)
            queue = deque(todo)
            for i in range(n):
                if queue:
                    running[i] = queue.popleft()
                    pool.submit(i, "prompt", running[i])
            while running:
                i, res = pool.next()
                p = running.pop(i)
                write_json(_prompt_file(out, p), res)
                result["done"] += 1
                log(f"[{result['done']}/{result['prompts']}] worker {i}: {_done_line(p, res)}")
                if queue:
                    running[i] = queue.popleft()
                    pool.submit(i, "prompt", running[i])
            if cfg.costs and not (out / "costs_final.json").exists():
                costs("costs_final.json", max(5, cfg.cost_reps))
            clean = True
        except _WorkerFailed as exc:
            p = running.get(exc.index)
            on = f" on prompt {p.dataset}-{p.index}" if p is not None else ""
            raise SpectheoryError(f"worker {exc.index} failed{on}: {exc}; the "
                                  f"{result['done']} prompt(s) written are kept, run the same "
                                  "command again to resume") from None
        finally:
            pool.close(30.0 if clean else 0.0)


@dataclass(frozen=True)
class CostsConfig:
    """Configuration of `measure`: per-forward costs with the run's models at the first
    prompt of ``datasets`` (cut to ``max_prompt_tokens``), median of ``reps``, written to
    ``OUT/costs.json``."""

    out: str = DEFAULT_OUT
    models: ModelSpec = field(default_factory=ModelSpec)
    K: int = 4
    Ls: tuple = (4, 8)
    reps: int = 5
    datasets: tuple = (("humaneval", 30), ("sharegpt", 30))
    max_prompt_tokens: int = 512
    seed: int = 0
    memory_limit_gib: float = 16.0

    def __post_init__(self):
        object.__setattr__(self, "datasets", _datasets(self.datasets))
        check_int("K", self.K, 1, MAX_PATHS)
        object.__setattr__(self, "Ls", _block_lengths(self.Ls))
        check_int("reps", self.reps, 1, 1000)
        check_int("max prompt tokens", self.max_prompt_tokens, 1, MAX_TOKENS)
        check_seed(self.seed)
        check_float("memory limit (GiB)", self.memory_limit_gib, 0, None, lo_open=True)
        check_out_folder(self.out)


def measure(cfg: CostsConfig, log=stderr_log) -> dict:
    """Measure per-forward costs (`spectheory.gpu_validation.forward_costs.measure_costs`) and
    (over)write OUT/costs.json atomically; returns the measurement."""
    from ..data import encode, load_prompts
    from ..hf_models import load_models

    V = cfg.models.check()
    check_memory(cfg.K, max(cfg.Ls), V, cfg.memory_limit_gib, "--K and --L")
    prompts = load_prompts(cfg.datasets[:1], cfg.seed)  # the first prompt is the first data set's
    pair = load_models(cfg.models)
    ids = encode(prompts[0], pair.tokenizer, cfg.max_prompt_tokens)
    costs = measure_costs(pair.draft, pair.target, ids, list(range(1, cfg.K + 1)), list(cfg.Ls),
                          cfg.models.device, reps=cfg.reps, log=log)
    costs["machine"] = machine_info(cfg.models.device)
    costs["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    write_json(Path(cfg.out) / "costs.json", costs)
    return costs


__all__ = ["DEFAULT_VERIFIERS", "RESULT_KEYS", "EXECUTORS", "RunConfig", "CostsConfig",
           "Replica", "run_prompt", "hash_prompt", "validate_run", "measure"]
