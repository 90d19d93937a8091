"""Summaries of a validation run (``spectheory validate summarize [OUT] [--markdown]``).

* **Block efficiency** of a configuration (verifier, K, L): the mean over all iterations of all
  prompts of E[tau | context, drafts] + 1 (the paired per-step values of `compare`), i.e. the
  expected tokens per target forward at the contexts visited. 95% intervals: percentile bootstrap
  over prompts (resample prompts with replacement, recompute the pooled mean over their steps).
* **Gains** (block over token at the same L; GBV over block at the same L): ratio of pooled means,
  with a paired bootstrap over prompts (both numerators and denominators from the same resample).
* **Realised tau**: histograms of the tau sampled from each law with common random numbers.
* **Time split**: measured seconds per iteration of drafting (K_max paths, L_max tokens), of the
  target forward, and of verification (the advancing verifier's law and sample).
* **Cost model** (a model, not a measurement): with measured per-forward costs from costs.json,
  speed-up(config) = BE * t_target(1 token) / (L t_draft(batch K, 1 token) + t_target(batch K,
  L+1 tokens) + t_verify(config)), where t_verify is the measured mean law time of that config.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spectheory.runtime.errors import SpectheoryError

from ..atomic import write_json
from ..checks import check_int, check_seed
from ..compare import config_key, parse_key
from .config import DEFAULT_OUT
from spectheory.runtime.limits import shown as _repr_cut

#: Multi-path verifiers whose K = 1 case is exactly a single-path one.
K1_REDUCTION = {"gbv": "block", "traversal-iid": "block", "traversal": "block",
                "specinfer": "token", "spectr": "token", "block-first": "block",
                "token-first": "token"}


#: Largest run record read (bytes): a prompt's record is a few kilobytes a step.
MAX_RECORD_BYTES = 64 * 2**20


def _read_json(path: Path):
    """A run record as JSON, or one line naming it: read as the toolkit reads its input files
    (`read_json_text`: bounded, and a named pipe that no writer writes to within a second is
    refused, where ``read_text`` waited on it for ever)."""
    from spectheory.inputs.instances import read_json_text

    try:
        return json.loads(read_json_text(path, str(path), MAX_RECORD_BYTES, "run record"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpectheoryError(f"{path} is not readable JSON ({type(exc).__name__})") from None


def load_run(out: str | Path):
    """(run.json, costs or None, per-prompt records) of a run folder; the end-of-run cost
    measurement (costs_final.json) is preferred to the start-of-run one."""
    out = Path(out)
    if os.path.lexists(out) and not out.is_dir():  # a file: "run.json missing" named no cause
        raise SpectheoryError(f"{out} is not a folder (a run folder of validate run)")
    if not os.path.lexists(out / "run.json"):  # a named pipe or a folder there: read below,
        raise SpectheoryError(f"no run in {out} (run.json missing)")  # and named as what it is
    run = _read_json(out / "run.json")
    costs = None
    for name in ("costs_final.json", "costs.json"):  # the end-of-run measurement first
        if (out / name).exists():
            costs = _check_costs(_read_json(out / name), out / name)
            costs["file"] = name
            break
    files = sorted((out / "prompts").glob("*.json"))
    prompts = [_read_json(p) for p in files]
    bad = [p for p in prompts if not isinstance(p, dict) or "steps" not in p]
    if bad or not isinstance(run, dict):
        raise SpectheoryError(f"{out} holds records that are not validation-run results")
    for path, rec in zip(files, prompts):
        _check_steps(rec, path)
    _check_run(run, out / "run.json")
    return run, costs, prompts


def _check_run(run: dict, path: Path) -> None:
    """The fields of run.json the summary prints, where present (older runs lack some), or
    one line naming the field: ``K`` an integer >= 1, ``Ls`` distinct block lengths >= 1,
    ``verifiers`` registered names and ``advance`` one of them (null, [] or "4,8" were
    printed in the summary's run section as the run's settings)."""
    from spectheory.inputs.instances import MAX_BLOCK
    from spectheory.registry import get_verifier

    def whole(v, hi) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= hi

    if "K" in run and not whole(run["K"], 1024):
        raise SpectheoryError(f"{path}: K = {_repr_cut(run['K'], 40)} is not a number of paths >= 1")
    Ls = run.get("Ls", [1])
    if not isinstance(Ls, list) or not Ls or not all(whole(L, MAX_BLOCK) for L in Ls) \
            or len(set(Ls)) != len(Ls):
        raise SpectheoryError(f"{path}: Ls = {_repr_cut(Ls, 60)} is not a list of distinct block lengths "
                              f"in 1..{MAX_BLOCK}")
    names = run.get("verifiers", ["token"])
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise SpectheoryError(f"{path}: verifiers = {_repr_cut(names, 60)} is not a list of verifier "
                              "names")
    for n in names + ([run["advance"]] if "advance" in run else []):
        try:
            get_verifier(n if isinstance(n, str) else repr(n))
        except SpectheoryError:
            raise SpectheoryError(f"{path}: {_repr_cut(n, 40)} is not a registered verifier") from None


def _seconds(v) -> bool:
    """Whether ``v`` is a finite number >= 0 read from JSON (not a bool): a time in seconds."""
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and v >= 0


def _check_costs(costs, path: Path) -> dict:
    """A costs file as the cost model reads it, or one line naming it: ``target_1tok`` a
    positive number of seconds, ``draft_1tok`` ({"K<k>": s}) and ``target_Ltok``
    ({"K<k>/L<l>": s}) objects of positive numbers (an empty list, a missing key or zero costs
    were tracebacks; negative costs gave speed-ups from negative times)."""
    def seconds(v) -> bool:
        return _seconds(v) and v > 0

    if not isinstance(costs, dict):
        raise SpectheoryError(f"{path}: not a JSON object of per-forward costs")
    if not seconds(costs.get("target_1tok")):
        raise SpectheoryError(f"{path}: target_1tok = {_repr_cut(costs.get('target_1tok'), 40)} is not a "
                              "positive number of seconds")
    for key, pattern in (("draft_1tok", r"K[0-9]+"), ("target_Ltok", r"K[0-9]+/L[0-9]+")):
        table = costs.get(key)
        if not isinstance(table, dict):
            raise SpectheoryError(f"{path}: {key} is not an object of per-forward costs")
        for k, v in table.items():
            if not re.fullmatch(pattern, k) or not seconds(v):
                raise SpectheoryError(f"{path}: {key}[{_repr_cut(k, 40)}] = {_repr_cut(v, 40)} is not a positive "
                                      "number of seconds")
    return costs


def _check_steps(rec: dict, path: Path) -> None:
    """A prompt record's steps as the summary reads them, or one line naming the file: a list
    of objects whose ``e_tau`` maps each configuration ``name/K<k>/L<l>`` to a finite number in
    [0, l] (the expected accepted tokens of a block of l), ``tau`` to an integer in 0..l."""
    import math

    from ..compare import parse_key

    steps = rec.get("steps")
    if not isinstance(steps, list):
        raise SpectheoryError(f"{path}: steps is not a list of steps")
    if not steps:  # a prompt's block efficiency is a mean over its steps
        raise SpectheoryError(f"{path}: steps is empty (a finished prompt has at least one step)")
    for i, st in enumerate(steps):
        e_tau = st.get("e_tau") if isinstance(st, dict) else None
        if not isinstance(e_tau, dict):
            raise SpectheoryError(f"{path}: step {i} has no e_tau mapping")
        # the timings the summary averages: NaN, negative or text ones were printed as results
        # or were tracebacks
        for name in ("draft_s", "target_s", "verify_s") + (("stop_dev",) if "stop_dev" in st
                                                             else ()):
            if not _seconds(st.get(name)):
                raise SpectheoryError(f"{path}: step {i}: {name} = {_repr_cut(st.get(name), 40)} is not a "
                                      "finite number >= 0")
        law_s = st.get("law_s")
        if not isinstance(law_s, dict) or set(law_s) != set(e_tau) \
                or not all(_seconds(v) for v in law_s.values()):
            raise SpectheoryError(f"{path}: step {i}: law_s is not an object of one finite "
                                  "number >= 0 (seconds) for each configuration of e_tau")
        for key, value in e_tau.items():
            try:
                L = parse_key(key)[2]
            except (ValueError, TypeError):
                raise SpectheoryError(f"{path}: step {i}: {_repr_cut(key, 60)} is not a configuration "
                                      "name/K<k>/L<l>") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not 0 <= value <= L:
                raise SpectheoryError(f"{path}: step {i}: e_tau[{key!r}] = {_repr_cut(value, 40)} is not "
                                      f"a number in [0, {L}] (expected accepted tokens of a "
                                      f"block of {L})")
            tau = st.get("tau", {}).get(key) if isinstance(st.get("tau"), dict) else None
            if tau is not None and (isinstance(tau, bool) or not isinstance(tau, int)
                                    or not 0 <= tau <= L):
                raise SpectheoryError(f"{path}: step {i}: tau[{key!r}] = {_repr_cut(tau, 40)} is not an "
                                      f"integer in 0..{L}")


def per_prompt_sums(prompts, key):
    """(sum over steps of e_tau + 1, number of steps) per prompt for one configuration."""
    s = np.array([sum(st["e_tau"][key] + 1 for st in p["steps"]) for p in prompts])
    n = np.array([len(p["steps"]) for p in prompts], dtype=float)
    return s, n


def bootstrap_indices(n_prompts: int, n_boot: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_prompts, size=(n_boot, n_prompts))


def be_with_ci(prompts, key, idx):
    s, n = per_prompt_sums(prompts, key)
    est = s.sum() / n.sum()
    boots = s[idx].sum(1) / n[idx].sum(1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return est, lo, hi


def ratio_with_ci(prompts, key_a, key_b, idx):
    """(BE_a / BE_b) with a paired bootstrap over prompts."""
    sa, n = per_prompt_sums(prompts, key_a)
    sb, _ = per_prompt_sums(prompts, key_b)
    est = sa.sum() / sb.sum()
    boots = sa[idx].sum(1) / sb[idx].sum(1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return est, lo, hi


def keys_of(prompts):
    keys = set()
    for p in prompts:
        for st in p["steps"]:
            keys.update(st["e_tau"])
    return sorted(keys, key=lambda k: (parse_key(k)[0], parse_key(k)[2], parse_key(k)[1]))


def summary(out, n_boot=2000, seed=0) -> dict:
    run, costs, prompts = load_run(out)
    if not prompts:
        raise SpectheoryError(f"no finished prompts in {out}/prompts yet")
    idx = bootstrap_indices(len(prompts), n_boot, seed)
    keys = keys_of(prompts)
    res = {"prompts": len(prompts), "steps": int(sum(len(p["steps"]) for p in prompts)),
           "by_dataset": {}, "configs": {}, "gains": {}, "timing": {}, "histograms": {},
           "cost_model": {}}
    for ds in sorted({p["dataset"] for p in prompts}):
        res["by_dataset"][ds] = sum(p["dataset"] == ds for p in prompts)
    for k in keys:
        est, lo, hi = be_with_ci(prompts, k, idx)
        law_s = float(np.mean([st["law_s"][k] for p in prompts for st in p["steps"]]))
        res["configs"][k] = {"be": est, "lo": lo, "hi": hi, "law_s": law_s}
        name, K, L = parse_key(k)
        hist = np.bincount([st["tau"][k] for p in prompts for st in p["steps"]],
                           minlength=L + 1)
        res["histograms"][k] = hist.tolist()
        for ds in res["by_dataset"]:
            sub = [p for p in prompts if p["dataset"] == ds]
            sidx = bootstrap_indices(len(sub), n_boot, seed)
            e, lo2, hi2 = be_with_ci(sub, k, sidx)
            res["configs"][k][ds] = {"be": e, "lo": lo2, "hi": hi2}
    Ls = sorted({parse_key(k)[2] for k in keys})
    Ks = sorted({parse_key(k)[1] for k in keys})
    for L in Ls:
        tk, bk = config_key("token", 1, L), config_key("block", 1, L)
        if tk in keys and bk in keys:
            res["gains"][f"block/token L{L}"] = ratio_with_ci(prompts, bk, tk, idx)
        for K in Ks:
            gk = config_key("gbv", K, L)
            if gk in keys and bk in keys:
                res["gains"][f"gbv K{K}/block L{L}"] = ratio_with_ci(prompts, gk, bk, idx)
    steps = [st for p in prompts for st in p["steps"]]
    # first-token acceptance against the per-step L = 1 optimum with K drafts (Hu et al.)
    with_opt = [st for st in steps if "opt_L1" in st and "accept1" in st]
    if with_opt:
        res["first_token"] = {}
        for k in keys:
            name, K, L = parse_key(k)
            pairs = [(st["accept1"][k], st["opt_L1"][f"K{K}"]) for st in with_opt
                     if k in st["accept1"] and f"K{K}" in st["opt_L1"]]
            if pairs:
                acc, opt = np.array(pairs).T
                res["first_token"][k] = {"acceptance": float(acc.mean()),
                                         "optimum": float(opt.mean()),
                                         "gap": float((opt - acc).mean()),
                                         "max_gap": float((opt - acc).max())}
    res["timing"] = {name: float(np.mean([st[name] for st in steps]))
                     for name in ("draft_s", "target_s", "verify_s")}
    res["timing_median"] = {name: float(np.median([st[name] for st in steps]))
                            for name in ("draft_s", "target_s", "verify_s")}
    res["law_s_median"] = {k: float(np.median([st["law_s"][k] for p in prompts
                                               for st in p["steps"]])) for k in keys}
    res["timing"]["stop_dev_max"] = float(max(st.get("stop_dev", 0.0) for st in steps))
    # In-run overhead, measured in the same process and interleaved with the forwards (so the
    # same machine load): median law time / median target-forward time (K_max paths, L_max+1).
    tgt = res["timing_median"]["target_s"]
    res["overhead"] = {k: res["law_s_median"][k] / tgt for k in keys}
    for L in Ls:
        tk, bk = config_key("token", 1, L), config_key("block", 1, L)
        if tk in keys and bk in keys:
            res["overhead"][f"block/token time L{L}"] = \
                res["law_s_median"][bk] / res["law_s_median"][tk]
    if costs:
        t1 = costs["target_1tok"]
        for k, c in res["configs"].items():
            name, K, L = parse_key(k)
            tt = costs["target_Ltok"].get(f"K{K}/L{L}")
            td = costs["draft_1tok"].get(f"K{K}")
            if tt is None or td is None:  # the model's rows of this K were dropped, unsaid
                missing = "draft_1tok has no " + f"K{K}" if td is None else \
                    f"target_Ltok has no K{K}/L{L}"
                raise SpectheoryError(f"{costs.get('file', 'costs')}: {missing}, which the "
                                      f"run's configuration {k} needs for its cost model")
            tv = res["law_s_median"][k]
            denom = L * td + tt + tv
            res["cost_model"][k] = {"speedup_model": c["be"] * t1 / denom,
                                    "speedup_model_no_verify": c["be"] * t1 / (L * td + tt),
                                    "verify_share_of_target": tv / tt}
        res["costs"] = {k: v for k, v in costs.items() if k != "machine"}
    res["run"] = {k: run[k] for k in ("datasets", "max_new_tokens", "K", "Ls", "advance",
                                      "temperature", "verifiers") if k in run}
    res["machine"] = run.get("machine")
    return res


def _fmt_ci(c):
    return f"{c['be']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]"


def markdown(res, cost_model: bool = True) -> str:
    configs = res["configs"]
    names = []
    for k in configs:
        n = parse_key(k)[0]
        if n not in names:
            names.append(n)
    Ks = sorted({parse_key(k)[1] for k in configs} | {1})
    Ls = sorted({parse_key(k)[2] for k in configs})
    lines = [f"Block efficiency E[tau]+1 (paired, exact conditional per step), 95% bootstrap CI "
             f"over prompts; {res['prompts']} prompts "
             f"({', '.join(f'{d}: {n}' for d, n in res['by_dataset'].items())}), "
             f"{res['steps']} iterations.", ""]
    for L in Ls:
        lines.append(f"| L = {L} | " + " | ".join(f"K = {K}" for K in Ks) + " |")
        lines.append("|---" * (len(Ks) + 1) + "|")
        for n in names:
            cells = []
            for K in Ks:
                k = config_key(n, K, L)
                if k in configs:
                    cells.append(_fmt_ci(configs[k]))
                elif K == 1 and n in K1_REDUCTION:
                    red = config_key(K1_REDUCTION[n], 1, L)
                    cells.append(f"= {K1_REDUCTION[n]}" if red in configs else "")
                else:
                    cells.append("")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
    Lmax = max(Ls)
    main = [k for k in (config_key("token", 1, Lmax), config_key("block", 1, Lmax),
                        config_key("gbv", 3, Lmax), config_key("gbv", max(Ks), Lmax),
                        config_key("specinfer", max(Ks), Lmax)) if k in configs]
    if len(res["by_dataset"]) > 1 and main:
        lines.append("By data set (L = %d):" % Lmax)
        lines.append("")
        lines.append("| data set | " + " | ".join(main) + " |")
        lines.append("|---" * (len(main) + 1) + "|")
        for ds in res["by_dataset"]:
            lines.append(f"| {ds} ({res['by_dataset'][ds]}) | "
                         + " | ".join(_fmt_ci(configs[k][ds]) for k in main) + " |")
        lines.append("")
    ft = res.get("first_token", {})
    if ft:
        lines.append("First-token acceptance P(tau >= 1 | drafts) against the per-step optimum "
                     "of any valid verifier with K i.i.d. drafts of one token (Hu et al., arXiv "
                     "2502.18779), means over iterations (each step's acceptance is conditional "
                     "on its drafts; its mean estimates the expected acceptance, which the mean "
                     "optimum bounds):")
        lines.append("")
        lines.append("| configuration | acceptance | optimum | mean gap | largest gap |")
        lines.append("|---|---|---|---|---|")
        for k, v in ft.items():
            lines.append(f"| {k} | {v['acceptance']:.4f} | {v['optimum']:.4f} | "
                         f"{v['gap']:.4f} | {v['max_gap']:.4f} |")
        lines.append("")
    lines.append("Gains (ratio of block efficiencies, paired bootstrap 95% CI):")
    lines.append("")
    lines.append("| comparison | ratio | published |")
    lines.append("|---|---|---|")
    pub = {"block/token L8": "+8.3% (Sun et al., PaLM-2, L=8)",
           "block/token L4": "+3.5% (Sun et al., L=4)"}
    for name, (e, lo, hi) in res["gains"].items():
        p = pub.get(name, "GBV: >30% over block at best settings (Thomas & Pal)"
                    if name.startswith("gbv") else "")
        lines.append(f"| {name} | {e:.3f} [{lo:.3f}, {hi:.3f}] | {p} |")
    lines.append("")
    t, tm = res["timing"], res["timing_median"]
    lines.append(f"Measured time per iteration (K = {res['run'].get('K')}, L = "
                 f"{max(res['run'].get('Ls', [0]))}; mean / median over iterations): drafting "
                 f"{t['draft_s']:.2f} / {tm['draft_s']:.2f} s, target forward "
                 f"{t['target_s']:.2f} / {tm['target_s']:.2f} s, verification (the advancing "
                 f"verifier's law and sample) {t['verify_s']:.3f} / {tm['verify_s']:.3f} s; "
                 f"max |sum stop - 1| over all laws {t['stop_dev_max']:.1e}.")
    lines.append("")
    ov = res.get("overhead", {})
    lines.append("Verification overhead measured inside the run (same process, interleaved with "
                 "the forwards): median law time as a share of the median target forward "
                 f"(K = {res['run'].get('K')} paths x {max(res['run'].get('Ls', [0])) + 1} "
                 "tokens); single-path laws are evaluated on all K paths at once:")
    lines.append("")
    for k, v in ov.items():
        if k.startswith("block/token"):
            lines.append(f"- {k}: {v:.2f}x")
        elif parse_key(k)[0] in ("token", "block") or parse_key(k)[1] == res["run"].get("K"):
            lines.append(f"- {k}: {100 * v:.1f}% ({res['law_s_median'][k] * 1e3:.0f} ms)")
    lines.append("")
    if cost_model and res.get("cost_model"):
        c = res["costs"]
        lines.append(f"Measured per-forward costs ({c.get('file', 'costs.json')}, load average "
                     f"{c.get('loadavg', ['?'])[0]} at the time; context {c['context_tokens']} "
                     "tokens): target "
                     f"1 token {c['target_1tok']:.3f} s; draft 1 token at batch K: "
                     + ", ".join(f"{k} {v:.3f} s" for k, v in c["draft_1tok"].items())
                     + "; target L+1 tokens at batch K: "
                     + ", ".join(f"{k} {v:.3f} s" for k, v in c["target_Ltok"].items()) + ".")
        lines.append("")
        lines.append("Cost MODEL (not a measurement): speed-up = BE * t_T(1) / (L t_D(K) + "
                     "t_T(K, L+1) + t_verify):")
        lines.append("")
        lines.append("| config | BE | model speed-up | same, verification free | "
                     "verify (median) / target forward |")
        lines.append("|---|---|---|---|---|")
        for k, m in res["cost_model"].items():
            lines.append(f"| {k} | {configs[k]['be']:.2f} | {m['speedup_model']:.2f} | "
                         f"{m['speedup_model_no_verify']:.2f} | "
                         f"{100 * m['verify_share_of_target']:.1f}% |")
        lines.append("")
    lines.append("Realised tau histograms (tau = 0..L, counts over iterations):")
    lines.append("")
    for k, h in res["histograms"].items():
        name, K, L = parse_key(k)
        if L == max(Ls) and (K in (1, max(Ks))):
            lines.append(f"- {k}: {h}")
    return "\n".join(lines)


@dataclass(frozen=True)
class SummarizeConfig:
    """Configuration of `summarize`.

    Parameters
    ----------
    out : str
        The run's folder.
    bootstrap : int
        Bootstrap resamples (over prompts).
    seed : int
        Seed of the resampling.
    markdown : bool
        Markdown tables instead of JSON.
    cost_model : bool
        Include the per-forward costs and the cost-model table (markdown).
    write_json : bool
        Also write OUT/summary.json (atomically).
    """

    out: str = DEFAULT_OUT
    bootstrap: int = 2000
    seed: int = 0
    markdown: bool = False
    cost_model: bool = True
    write_json: bool = False

    def __post_init__(self):
        check_int("bootstrap", self.bootstrap, 1, 1_000_000)
        check_seed(self.seed)


def summarize(cfg: SummarizeConfig) -> str:
    """The summary of the run in ``cfg.out`` as text (markdown tables, or JSON without the
    histograms); writes OUT/summary.json when asked."""
    res = summary(cfg.out, cfg.bootstrap, cfg.seed)
    if cfg.write_json:
        write_json(Path(cfg.out) / "summary.json", res)
    if cfg.markdown:
        return markdown(res, cost_model=cfg.cost_model)
    return json.dumps({k: v for k, v in res.items() if k != "histograms"}, indent=1)


__all__ = ["K1_REDUCTION", "SummarizeConfig", "summarize", "summary", "markdown", "load_run"]
