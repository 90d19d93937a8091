"""Benchmark: measured power of ``check_sampler`` (law mode, 3,000 samples) against every replica of
the bug kit, on the sharp design (`spectheory.testing.designs.sharp`) and on the default instances,
and the false-alarm rate of correct samplers.

For each verifier (token, block) the design is built once from exact laws
(``kit_design(verifier, 3000, alpha)``). Then, for every replica with a sampler (the formula
mutants through ``make_sampler``, vLLM #47386's shared-noise sampler, the planted bugs of the
engine ports through their presets):

* ``--reps`` checks with seeds 0, 1, ... on the sharp rows and ``--default-reps`` on the
  default instances (whose draft rows the seed draws): the fraction failed is the measured power,
  with a Clopper-Pearson 95% interval; the design's predicted power beside it;
* one check of the sampler against its own stated exact law (the replica's law as the verifier,
  50,000 samples on the sharp rows and 10,000 on the default instances; 10,000 / 2,000 for the
  transformers port, one sequence a call): it must pass, else the prediction is about another
  law;
* calibration: each law once, on the sharp rows at the sample count where its predicted power
  is nearest 0.5.

The stages run in that order of importance (sharp rows, false alarms, own laws, calibration,
default instances), and the results are written after every step.

Correct samplers (spectheory's token and block samplers, the vLLM V1, SGLang, MRV2 and
transformers ports, the independent-noise control of #47386) run ``--fa-reps`` checks on the
sharp rows at alpha = 1e-3 and at alpha = 0.05 (a design built for that alpha), so that the
false-alarm rate is resolved against alpha.

A sampler that raises inside a check (the transformers port's ``torch.multinomial`` on a residual
of mass 0) is counted apart ("errors"), not as caught.

Run (one torch thread, low priority):
``OMP_NUM_THREADS=1 nice -n 19 env PYTHONPATH=benchmarks .venv/bin/python
benchmarks/bench_power.py [--reps 200] [--default-reps 100] [--slow-reps 50] [--fa-reps 600]
[--out benchmarks/results]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time

import numpy as np
import torch
from scipy.stats import beta

from spectheory.registry import VerifierSpec
from spectheory.runtime.errors import SpectheoryError
from spectheory.testing.engines import adapters as A
from spectheory.testing.engines import layouts as Lm
from spectheory.testing.mutants import coins
from spectheory.testing.checks.sampler import check_sampler, make_sampler
from spectheory.testing.designs.sharp import kit_design, predicted_power, simulated_power

from _machine import cpu_name

BUDGET = 3000


def interval(k: int, n: int) -> list:
    """Clopper-Pearson 95% interval of k successes in n."""
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return [lo, hi]


def run(sampler, verifier, instances, reps, alpha, seed0=0, samples=BUDGET, paths=1):
    caught = errors = 0
    for s in range(seed0, seed0 + reps):
        try:
            rep = check_sampler(sampler, verifier, instances=instances, samples=samples,
                                alpha=alpha, seed=s, paths=paths)
        except SpectheoryError:
            errors += 1
            continue
        caught += not rep.passed
    return {"reps": reps, "caught": caught, "errors": errors, "rate": caught / reps,
            "ci95": interval(caught, reps)}


def default_rows(paths=1, per_instance=8, seed=12345):
    """Draft rows of the default instances (``per_instance`` drafted from each instance's draft
    model, seeded), in K-path form."""
    from spectheory.engine.joint import draft_rows
    from spectheory.engine.sampling import sample_drafts
    from spectheory.engine.seqtree import levels
    from spectheory.testing.checks.sampler import DraftRows, default_instances

    g = torch.Generator().manual_seed(seed)
    out = []
    for inst in default_instances():
        inst = inst.to_float()
        V, L = inst.vocab_size, inst.block_length
        d = sample_drafts(inst, paths, per_instance, "iid", g)
        q, p = draft_rows(levels(inst.draft, 0, L, False), levels(inst.target, 0, L + 1, False),
                          d, L, V)
        out.append(DraftRows(d, q, p))
    return out


def defined_rows(r, rows):
    """The rows on which the replica has a law (rows where a correction row of mass zero is
    reached leave the engine's behaviour undefined: token 0, a fallback row or an error)."""
    from spectheory.testing.designs.sharp import _rep_cells

    out = []
    for d, q, p in rows:
        keep = torch.as_tensor(~np.isnan(_rep_cells(r.law, d, q, p)).any(-1))
        if keep.any():
            out.append(type(rows[0])(d[keep], q[keep], p[keep]))
    return out


def agreement(r, rows, slow, paths=1):
    """The replica's sampler against its own stated law: p-values on the sharp rows and on 32
    draft rows of the default instances where the replica has a law (both must pass)."""
    spec = VerifierSpec(r.name, r.law, paths=1 if paths == 1 else None, lossless=False,
                        exact=False, drafting="iid")
    out = {}
    for where, inst, n in (("sharp", rows, 10_000 if slow else 50_000),
                           ("default", defined_rows(r, default_rows(paths)),
                            2_000 if slow else 10_000)):
        try:
            rep = check_sampler(r.sampler, spec, instances=inst, samples=n, seed=12345,
                                paths=paths)
            out[where] = {"samples": n, "passed": rep.passed, "p_value": rep.p_value}
        except SpectheoryError as e:
            out[where] = {"samples": n, "passed": None, "error": str(e).splitlines()[0]}
    return out


def half_power_samples(design, r, alpha, paths=1):
    """The sample count (at least one a row) at which the replica's predicted power on the
    design's rows is nearest 0.5 (bisection; predicted power grows with the samples)."""
    lo = sum(x.drafts.shape[0] for x in design.rows)
    hi = BUDGET

    def power(n):
        return predicted_power(design.rows, [r], design.verifier, n, alpha,
                               paths=paths)[r.name].power

    if power(lo) >= 0.5:
        return lo, power(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if power(mid) < 0.5 else (lo, mid)
    return hi, power(hi)


def correct_samplers():
    return {
        ("gbv", 2): {"spectheory gbv (K = 2)": make_sampler("gbv", 2)},
        ("gbv", 3): {"spectheory gbv (K = 3)": make_sampler("gbv", 3)},
        ("traversal-tree", 3): {"spectheory traversal-tree (K = 3)":
                                make_sampler("traversal-tree", 3)},
        "token": {
            "spectheory token": make_sampler("token"),
            "vllm-v1 port": Lm.engine_sampler(A.vllm_v1_rejection_sample, Lm.VLLM_V1),
            "sglang port": Lm.engine_sampler(A.sglang_chain_speculative_sampling,
                                             Lm.SGLANG_CHAIN),
            "vllm-mrv2 port": A.vllm_mrv2_sampler("standard"),
            "transformers port": Lm.engine_sampler(A.hf_speculative_sampling, Lm.TRANSFORMERS),
            "#47386 control (independent noise)": coins.independent_noise_sampler,
        },
        "block": {
            "spectheory block": make_sampler("block"),
            "vllm-mrv2 block port": A.vllm_mrv2_sampler("block"),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200, help="checks a replica on the sharp rows")
    ap.add_argument("--default-reps", type=int, default=100,
                    help="checks a replica on the default instances")
    ap.add_argument("--slow-reps", type=int, default=50,
                    help="checks a design for the transformers port (one sequence a call)")
    ap.add_argument("--fa-reps", type=int, default=600)
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--designs", default="token,block",
                    help="verifier[:K] list, e.g. gbv:2,gbv:3,traversal-tree:3")
    ap.add_argument("--name", default="power", help="stem of the result files")
    ap.add_argument("--only", default=None,
                    help="rerun these stages (comma list of sharp, false-alarms, agreement, "
                         "calibration, default) on the existing result file, keeping the rest")
    args = ap.parse_args()
    plans = []
    for item in args.designs.split(","):
        v, _, k = item.partition(":")
        plans.append((v, int(k or 1)))
    torch.set_num_threads(1)
    t0 = time.time()
    result = {
        "benchmark": "bench_power.py",
        "command": " ".join(["python"] + sys.argv),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpu": cpu_name(), "platform": platform.platform(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads()},
        "budget": BUDGET, "alpha": args.alpha, "reps": args.reps,
        "default_reps": args.default_reps, "slow_reps": args.slow_reps,
        "designs": {}, "replicas": [], "invisible": [], "false_alarms": [], "calibration": [],
        "stages_done": [],
    }
    only = None if args.only is None else set(args.only.split(","))
    if only is not None:
        with open(os.path.join(args.out, f"{args.name}.json")) as f:
            old = json.load(f)
        old.setdefault("reruns", []).append({"command": result["command"],
                                             "date": result["date"]})
        result = old
        names = {"false alarms": "false-alarms", "law agreement": "agreement",
                 "default instances": "default"}
        result["stages_done"] = [names.get(x, x) for x in result["stages_done"]
                                 if names.get(x, x) not in only]
        if "false-alarms" in only:
            result["false_alarms"] = []
        if "calibration" in only:
            result["calibration"] = []
        t0 -= result.get("seconds", 0.0)

    def wanted(stage):
        return only is None or stage in only

    def save(stage=None):
        if stage:
            result["stages_done"].append(stage)
        result["seconds"] = time.time() - t0
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.name}.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(args.out, f"{args.name}.md"), "w") as f:
            f.write(markdown(result))

    def say(text):
        print(f"{text} ({time.time() - t0:.0f} s)", flush=True)

    designs, rows = {}, {}
    for verifier, K in plans:
        label = verifier if K == 1 else f"{verifier} (K = {K})"
        design = designs[label] = kit_design(verifier, BUDGET, args.alpha, K)
        result["designs"][label] = {
            "rows": [{"V": int(r.q.shape[-1]), "L": int(r.drafts.shape[-1]),
                      "copies": int(r.drafts.shape[0]),
                      "drafts": r.drafts[0].tolist(), "q": r.q[0].tolist(),
                      "p": r.p[0].tolist()} for r in design.rows],
            "copies": design.copies, "samples_per_row": design.samples_per_row,
            "detectable_tv": design.detectable_tv, "generic_tv": design.generic_tv,
            "generic_power": design.generic_power, "table": design.table()}
        print(design.table(), flush=True)
        for r in design.replicas:
            if not r.visible or r.law is None:
                if only is not None:
                    continue
                result["invisible"].append({"name": r.name, "verifier": label,
                                            "source": r.source, "caught_by": r.caught_by})
                continue
            pred = design.predicted[r.name]
            entry = {
                "name": r.name, "verifier": label, "source": r.source,
                "predicted_power": pred.power, "simulated_from_law": pred.simulated,
                "noncentrality": pred.noncentrality, "zero_cell_samples": pred.zero_mass,
                "tv_on_rows": pred.tv}
            if only is not None:  # keep the recorded row, refresh the prediction
                found = [x for x in result["replicas"]
                         if x["name"] == r.name and x["verifier"] == label]
                if found:
                    found[0].update(entry)
                    entry = found[0]
                else:
                    result["replicas"].append(entry)
            else:
                result["replicas"].append(entry)
            rows[(label, r.name)] = (r, label, K, entry)
    # 1. every replica on the sharp rows
    for r, label, K, row in (rows.values() if wanted("sharp") else ()):
        reps = args.slow_reps if "transformers" in r.name else args.reps
        row["sharp"] = run(r.sampler, r.verifier, designs[label].rows, reps, args.alpha, paths=K)
        say(f"{r.name:42s} predicted {row['predicted_power']:.4f} measured "
            f"{row['sharp']['rate']:.3f} on the sharp rows")
        save()
    if wanted("sharp"):
        save("sharp")
    # 2. false alarms of correct samplers on the sharp rows, at alpha and at 0.05
    for a in ((args.alpha, 0.05) if wanted("false-alarms") else ()):
        for verifier, K in plans:
            samplers = correct_samplers()[verifier if K == 1 else (verifier, K)]
            design = kit_design(verifier, BUDGET, a, K)
            for name, s in samplers.items():
                reps = args.fa_reps // 5 if "transformers" in name else args.fa_reps
                res = run(s, verifier, design.rows, reps, a, seed0=10_000, paths=K)
                res.update(name=name, verifier=verifier if K == 1 else f"{verifier} (K = {K})",
                           alpha=a)
                result["false_alarms"].append(res)
                say(f"false alarms {name:36s} alpha {a:g}: {res['caught']}/{reps}")
                save()
    if wanted("false-alarms"):
        save("false-alarms")
    # 3. every replica's sampler against its own stated law
    for r, label, K, row in (rows.values() if wanted("agreement") else ()):
        row["law_agreement"] = agreement(r, designs[label].rows, "transformers" in r.name, K)
        say(f"{r.name:42s} own law: {row['law_agreement']}")
        save()
    if wanted("agreement"):
        save("agreement")
    # 4. calibration: each law once (its fastest sampler), at the sample count where the
    # predicted power on the sharp rows is nearest 0.5, so that predicted and measured are
    # compared where they can differ
    for verifier, K in (plans if wanted("calibration") else ()):
        label = verifier if K == 1 else f"{verifier} (K = {K})"
        design = designs[label]
        seen = set()
        for r in sorted(design.replicas, key=lambda r: "transformers" in r.name):
            if not r.visible or r.law is None or (r.law_key or r.name) in seen:
                continue
            seen.add(r.law_key or r.name)
            n, pw = half_power_samples(design, r, args.alpha, K)
            res = run(r.sampler, verifier, design.rows, args.reps, args.alpha, seed0=20_000,
                      samples=n, paths=K)
            res.update(name=r.name, verifier=label, samples=n, predicted_power=pw,
                       simulated_from_law=simulated_power(design.rows, r, verifier, n,
                                                          args.alpha, paths=K))
            result["calibration"].append(res)
            say(f"calibration {r.name:36s} n = {n}: predicted {pw:.3f} (law "
                f"{res['simulated_from_law']:.3f}) measured {res['rate']:.3f}")
            save()
    if wanted("calibration"):
        save("calibration")
    # 5. the same replicas on the default instances (the seed draws their draft rows)
    for r, label, K, row in (rows.values() if wanted("default") else ()):
        reps = args.slow_reps if "transformers" in r.name else args.default_reps
        row["default"] = run(r.sampler, r.verifier, None, reps, args.alpha, paths=K)
        say(f"{r.name:42s} measured {row['default']['rate']:.3f} on the default instances")
        save()
    if wanted("default"):
        save("default")


def markdown(res: dict) -> str:
    m = res["machine"]
    out = [f"# Power of law mode at {res['budget']:,} samples: sharp rows and default instances",
           "",
           f"`{res['command']}`, {res['date']}, {m['cpu']}, torch {m['torch']} "
           f"({m['torch_threads']} thread), {res['seconds'] / 60:.0f} min. alpha = "
           f"{res['alpha']:g}; {res['reps']} checks a replica on the sharp rows, "
           f"{res['default_reps']} on the default instances ({res['slow_reps']} each for the "
           f"transformers port, one sequence a call); seeds 0.. (the default instances' draft "
           f"rows change with the seed, the sharp rows do not). Stages done: "
           f"{', '.join(res['stages_done']) or 'none'}."]
    for rr in res.get("reruns", []):
        out.append(f"Rerun of stages: `{rr['command']}`, {rr['date']}.")
    out.append("")
    for v, d in res["designs"].items():
        shapes = ", ".join(f"V = {r['V']}, L = {r['L']} (x{r['copies']})" for r in d["rows"])
        out.append(f"* **{v}** design: {shapes}; {d['samples_per_row']} samples a row; "
                   f"detects any bias of TV >= {d['detectable_tv']:.4f} with 90% power "
                   f"(default instances: 0.085).")
    out += ["", "Predicted: the non-central chi-square power of the design (`replica_power`); "
                "from the law: the check's statistic simulated from the replica's exact law "
                "(`simulated_power`, 4,000 draws); measured: the sampler itself through "
                "`check_sampler`. Own law: the sampler checked against its stated exact law "
                "(must pass) on the sharp rows (50,000 samples) and on 32 draft rows of the "
                "default instances (10,000), leaving out rows where the replica has no law (a "
                "correction row of mass 0 reached: token 0, a fallback row or an error, by "
                "engine).", "",
            "| replica | verifier | predicted (sharp) | from the law | measured (sharp) | 95% CI | "
            "measured (default) | 95% CI | own law: sharp / default |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in res["replicas"]:
        s, d = r.get("sharp"), r.get("default")
        la = r.get("law_agreement")
        agree = "-" if la is None else " / ".join(
            "pass" if la[w].get("passed") else
            ("error" if la[w].get("passed") is None else "FAIL") for w in ("sharp", "default"))
        cells = []
        for x in (s, d):
            if x is None:
                cells += ["-", "-"]
                continue
            err = f" ({x['errors']} raised)" if x["errors"] else ""
            cells += [f"{x['rate']:.3f}{err}", f"{x['ci95'][0]:.3f}-{x['ci95'][1]:.3f}"]
        out.append(f"| {r['name']} | {r['verifier']} | {r['predicted_power']:.4f} | "
                   f"{r['simulated_from_law']:.4f} | " + " | ".join(cells) + f" | {agree} |")
    out += ["", "Calibration: each replica's law (one sampler a law) on the sharp rows at the "
                "sample count where its predicted power is nearest 0.5:", "",
            "| replica | verifier | samples | predicted | from the law | measured | 95% CI |",
            "|---|---|---|---|---|---|---|"]
    for r in res.get("calibration", []):
        out.append(f"| {r['name']} | {r['verifier']} | {r['samples']} | "
                   f"{r['predicted_power']:.3f} | {r['simulated_from_law']:.3f} | "
                   f"{r['rate']:.3f} | "
                   f"{r['ci95'][0]:.3f}-{r['ci95'][1]:.3f} |")
    out += ["", "Not visible to a sampling check (caught elsewhere):", ""]
    for r in res["invisible"]:
        out.append(f"* {r['name']} ({r['source']}): {r['caught_by']}")
    out += ["", "False alarms of correct samplers on the sharp rows:", "",
            "| sampler | verifier | alpha | false alarms | 95% CI |", "|---|---|---|---|---|"]
    for r in res["false_alarms"]:
        out.append(f"| {r['name']} | {r['verifier']} | {r['alpha']:g} | "
                   f"{r['caught']}/{r['reps']} | {r['ci95'][0]:.4f}-{r['ci95'][1]:.4f} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
