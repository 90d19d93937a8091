#!/usr/bin/env python
"""Mutation pass: plant one-line defects in the theory core and check that the tests catch them.

Each mutant replaces one fragment of one source line (the fragment must occur exactly once in
its file) and names the test files that should catch it. The runner copies the repository's
files (tracked and untracked, not ignored) into a temporary folder, links the mapped packages
(``spectheory.lp`` -> ``lp/`` etc., from ``[tool.setuptools.package-dir]`` of pyproject.toml) so
that the copy's code is what Python imports (checked before any mutant runs), runs the named test
files once unmutated (the baseline must pass), then per mutant: applies it, runs

    python -m pytest -q -x -p no:cacheprovider <test files>

with ``PYTHONPATH`` = the copy and ``PYTHONDONTWRITEBYTECODE=1`` (no stale bytecode between
mutants), restores the file, and records ``killed`` (a test failed or errored), ``survived``
(all passed), ``timeout`` or ``stale`` (the fragment is no longer in the file exactly once).
The working tree is never modified.

Usage:

    python scripts/mutation.py --list                 # the mutants, numbered
    python scripts/mutation.py                        # run them all
    python scripts/mutation.py --only 3,7-9           # some of them
    python scripts/mutation.py --markdown out.md      # also write the results table

Mutants marked ``equivalent`` change no observable behaviour (the reason is given); they are run
and reported but left out of the kill rate. Results and the reasoning behind each survivor:
docs/mutation.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class Mutant(NamedTuple):
    file: str
    original: str
    replacement: str
    rationale: str
    tests: tuple
    equivalent: str = ""  # why the change has no observable effect ("" = behavioural)


KILLS = "tests/test_defect_kills.py"
INSTANCE = ("tests/test_instance_check.py",)
BARE_IDS = ("tests/test_bare_law_ids.py",)
STREAMS = ("tests/test_hostile_streams_2026.py",)
LATE = ("tests/test_bad_inputs_late.py",)
READS = ("tests/test_input_streams.py",)
CACHE = ("tests/test_hostile_inputs.py",)
#: Why the real-size kernels' entry screen and weight check are second guards (mutants 204, 207,
#: 235, 236).
ROWS_GUARD = ("since the kernels clamp as torch does (mutant 221), a NaN or infinite entry, or a "
              "NaN weight, gives torch's residuals and sum; a NaN sum is sent to torch by the "
              "total check and an infinite one gives torch's quotients")
CORE = ("tests/test_core_exact.py", "tests/test_nodes.py", KILLS)
CHECKER = (KILLS, "tests/test_testing_lossless.py", "tests/test_checker_soundness.py")
LAWS = (KILLS, "tests/test_checker_soundness.py", "tests/test_bad_inputs.py")
NODES = ("tests/test_nodes.py", "tests/test_nodes_chunks.py", "tests/test_core_exact.py", KILLS)
STATS = (KILLS, "tests/test_testing_sampler.py")
GBV = ("tests/test_gbv_routes.py", "tests/test_spectr_gbv.py", "tests/test_multipath.py")
MULTI = ("tests/test_multipath.py", "tests/test_multipath_traversal.py")
TREES = ("tests/test_trees.py", "tests/test_trees_uneven.py")
LP_NB = ("tests/test_lp_node_budget.py", "tests/test_lp_certificate.py")
REPORTS = ("tests/test_sampler_reports.py",)
BUFFERS = ("tests/test_buffers.py",)
REAL = ("tests/test_real_laws_exact.py",)
KERNELS = ("tests/test_gbv_kernels.py", "tests/test_real_laws_exact.py")
ARGS = ("tests/test_hostile_kit_args.py",)
LP_DIRECT = ("tests/test_lp_direct.py", "tests/test_lp_multipath.py", "tests/test_lp_tree.py")
STATEFUL = ("tests/test_stateful.py",)
PENALISED = ("tests/test_penalised_steps.py", "tests/test_stateful.py")
SEEDS = ("tests/test_seeds.py",)
GRAMMARS = ("tests/test_grammar_engines.py", "tests/test_stateful.py")
PORTS = ("tests/test_tgi_port.py", "tests/test_mistralrs_port.py")
DEFECTS = "tests/test_defect_classes.py"
PLUGIN = ("tests/test_kit_friction.py", "tests/test_pytest_plugin.py", DEFECTS)
FLOOR = ("tests/test_exact_floor.py",)
ROWS = ("tests/test_real_rows.py",)
ROWS_CLI = ("tests/test_hostile_rows_cli_2026.py",)

MUTANTS = [
    # ---------------------------------------------------------------- verifiers
    Mutant("spectheory/verifiers/gbv.py",
           "A = (B.expand_dims(A, 1) + B.expand_dims(x, 1) * below).reshape(-1)",
           "A = (B.expand_dims(A, 1) + below).reshape(-1)",
           "GBV analytic route: skew mass A updated without the path mass x", GBV),
    Mutant("spectheory/verifiers/gbv.py",
           "A_next = A + x * B.take_along(below, t, axis=-1)[:, 0]",
           "A_next = A + B.take_along(below, t, axis=-1)[:, 0]",
           "GBV per-draft law: the same A-update without x along the selected path", GBV),
    Mutant("spectheory/verifiers/gbv.py",
           "key = B.where(alive, dpos, V)\n        alive = alive & (key == B.amin(",
           "key = B.where(alive, dpos, V)\n        alive = alive & (key == B.amax(",
           "GBV selects the worst-ranked drafted path instead of the best", GBV),
    Mutant("spectheory/verifiers/gbv.py",
           "        power = power * u\n",
           "        power = power * (u + d)\n",
           "GBV skew S_K(u, d) (numpy / exact path): wrong power in the Horner recursion", GBV),
    Mutant("spectheory/verifiers/block.py",
           "B.safe_div(S, S + (1 - w), B.scalar(S, 1))",
           "B.safe_div(S, S + 1, B.scalar(S, 1))",
           "block verification: h_i = S_i / (S_i + 1) (the 1 - w_i term dropped)", CORE),
    Mutant("spectheory/verifiers/block.py",
           "return w.mul_(state).clamp_(max=1) if B.is_torch(w)",
           "return w.mul_(state) if B.is_torch(w)",
           "block verification, float path: weight w_i not capped at 1", CORE),
    Mutant("spectheory/verifiers/block.py",
           "return w, (out if out is not None and compiled_copy(p, out) else p)",
           "return B.ones_like(w), (out if out is not None and compiled_copy(p, out) else p)",
           "block verification: the whole block always accepted at depth L (h_L = 1)", CORE),
    Mutant("spectheory/verifiers/token.py",
           "    else:\n        a = B.minimum(drafted_ratio(px, qx), 1)",
           "    else:\n        a = drafted_ratio(px, qx)",
           "token verification: acceptance p/q not capped at 1", CORE),
    Mutant("spectheory/verifiers/common.py",
           "    return B.positive_part(B.expand_dims(w, -1) * p - q)\n",
           "    return B.positive_part(p - q)\n",
           "residual max(w p - q, 0) without the weight w (exact path)", CORE),
    Mutant("spectheory/verifiers/common.py",
           "            r = torch.where(zero, torch.ones_like(r), r)",
           "            r = torch.where(zero, torch.zeros_like(r), r)",
           "a drafted token of draft probability 0 gets ratio 0 instead of 1", CORE,
           equivalent="such a token is never drafted: every quantity at its node is multiplied "
                      "by its draft mass 0, and the weights stay in [0, 1]"),
    Mutant("spectheory/verifiers/specinfer.py",
           "before = B.cumsum(member, axis=2) - member",
           "before = B.cumsum(member, axis=2)",
           "SpecInfer: candidate j tested against the residual after j+1 rejections (off by one)",
           MULTI + ("tests/test_trees.py",)),
    Mutant("spectheory/verifiers/specinfer.py",
           "qcur = B.where(act, _normalise(kept, kept), qcur)",
           "qcur = B.where(act, qcur, qcur)",
           "SpecInfer without replacement: the tried token is not removed from q", MULTI),
    Mutant("spectheory/verifiers/spectr.py",
           "        term = term * (1 - beta)",
           "        term = term * beta",
           "SpecTr: c_m(beta) summed over beta^j instead of (1 - beta)^j", MULTI),
    Mutant("spectheory/verifiers/traversal.py",
           "kept = Ms * (1 - onehot)",
           "kept = Ms",
           "traversal: the drafted first token is not removed from M_s (without replacement)",
           MULTI),
    # ---------------------------------------------------------------- engine
    Mutant("spectheory/engine/output.py",
           "    return Bk.sum(Bk.abs(a - b), axis=-1) / 2",
           "    return Bk.sum(Bk.abs(a - b), axis=-1)",
           "total variation without the factor 1/2 (per-draft and enumeration routes)", CHECKER),
    Mutant("spectheory/engine/output.py",
           "    tv = tv / 2\n",
           "    tv = tv\n",
           "total variation without the factor 1/2 (per-node route)", CHECKER),
    Mutant("spectheory/engine/analysis.py",
           "for v in tau_pmf[0]]\n    zero = Fraction(0) if exact else 0.0\n    e_tau = sum((i * v",
           "for v in tau_pmf[0]]\n    zero = Fraction(0) if exact else 0.0\n    e_tau = sum(((i + 1) * v",
           "E[tau] computed as E[tau + 1]", CORE),
    Mutant("spectheory/engine/output.py",
           "top = a.add_(mL[k0:k1]) if fused else a + mL[k0:k1]",
           "top = a if fused else a + mL[k0:k1]",
           "per-node output law (float): stop mass at depth L left out", CORE),
    Mutant("spectheory/engine/perdraft.py",
           "        tau_pmf[r0:r0 + part.shape[0]] += part",
           "        tau_pmf[r0:r0 + part.shape[0]] = part",
           "per-draft route: a chunk overwrites the tau pmf instead of adding to it",
           CORE + ("tests/test_nodes_chunks.py",)),
    Mutant("spectheory/engine/lossless.py",
           "        lossless = bool(float(tv) <= tol)",
           "        lossless = bool(float(tv) < tol)",
           "float verdict TV < tol: at tol = 0 an exact p = q is called lossy", CHECKER),
    Mutant("spectheory/engine/lossless.py",
           "if not math.isfinite(t) or t < 0 or t > MAX_LOSSLESS_TOL:",
           "if not math.isfinite(t) or t < 0 or t > 1:",
           "checker tolerance bounded by 1 instead of 1e-3 (a TV of 0.5 could be 'lossless')",
           CHECKER + ("tests/test_bad_inputs.py",)),
    Mutant("spectheory/engine/nodes.py",
           "    tail = B.concat([survive[:, 1:], B.ones_like(h[:, :1])], axis=1)",
           "    tail = B.concat([survive[:, :-1], B.ones_like(h[:, :1])], axis=1)",
           "backward scan: prod_{j>=i} instead of prod_{j>i} (1 - h_j)", NODES),
    Mutant("spectheory/engine/nodes.py",
           "return reached * B.concat([1 - c[:, 1:], one], axis=1)",
           "return reached * B.concat([c[:, 1:], one], axis=1)",
           "forward scan: stops with the pass probability instead of 1 - c", NODES),
    Mutant("spectheory/engine/nodes.py",
           "        stop[L - 1] = masses[L - 1] * weights[L - 1] * G",
           "        stop[L - 1] = masses[L - 1] * G",
           "per-node route: stop mass at depth L-1 without its acceptance weight", NODES),
    Mutant("spectheory/engine/nodes.py",
           "            parent_sum[r0:r1] = B.sum(qw, axis=1)",
           "            parent_sum[r0:r1] = B.sum(w.reshape(-1, V), axis=1)",
           "per-node route, forward: pass mass at depth L not weighted by q", NODES),
    Mutant("spectheory/engine/nodes.py",
           "mass = (B.expand_dims(mass, 1) * q_levels[d]).reshape(-1)",
           "mass = (B.expand_dims(mass, 1) * p_levels[d]).reshape(-1)",
           "per-node route: node mass from the target instead of the draft", NODES),
    Mutant("spectheory/engine/joint.py",
           "left = Bk.sum(Bk.expand_dims(q_root, 0) * (1 - used), axis=-1)",
           "left = Bk.sum(Bk.expand_dims(q_root, 0), axis=-1)",
           "norep drafting weight: no renormalisation after removing used tokens",
           ("tests/test_multipath.py",)),
    Mutant("spectheory/engine/joint.py",
           "        mult //= run",
           "        mult //= 1",
           "symmetric enumeration: sorted tuples weighted by K! whatever their repeats",
           ("tests/test_multipath.py", "tests/test_gbv_routes.py")),
    Mutant("spectheory/engine/joint.py",
           "ok &= (rows - 1).abs_().amax() <= tol / 2",
           "ok &= (rows - 1).amax() <= tol / 2",
           "fast law screen one-sided: correction rows summing below 1 skip validation",
           (KILLS, "tests/test_multipath.py", "tests/test_bad_inputs.py")),
    Mutant("spectheory/engine/joint.py",
           "shifts = (V**L) ** Bk.flip(base, 0).reshape(1, K)",
           "shifts = (V**L) ** base.reshape(1, K)",
           "ordered enumeration visits the joint outcomes in another order",
           ("tests/test_multipath.py",),
           equivalent="the map from outcome number to path tuple stays a bijection: every "
                      "ordered outcome is still visited once"),
    Mutant("spectheory/engine/drafttrees.py",
           "left = Bk.sum(rows * (1 - used), axis=-1)",
           "left = Bk.sum(rows, axis=-1)",
           "draft trees, norep: sibling weights not renormalised", TREES),
    Mutant("spectheory/engine/drafttrees.py",
           "child = Bk.expand_dims(idx, 1) * V + child_tok[:, sel_i]",
           "child = Bk.expand_dims(idx, 1) + child_tok[:, sel_i]",
           "draft trees, node route: child prefix index without the factor V", TREES),
    Mutant("spectheory/engine/drafttrees.py",
           "used = used + Bk.where(surplus, Bk.zeros_like(qx), qx)",
           "used = used + qx",
           "draft trees, norep candidates: a surplus child's token counted as used mass",
           TREES + ("tests/test_lp_tree.py",),
           equivalent="surplus is monotone in the child index (m <= j implies m <= j + 1): after "
                      "the first surplus child every later one is surplus too and takes the "
                      "repeat weight, so the used mass is never read again"),
    # ---------------------------------------------------------------- checker
    Mutant("spectheory/testing/checks/lossless.py",
           "rep = LosslessReport(False, None,",
           "rep = LosslessReport(True, None,",
           "battery: a verifier that returns no law is reported lossless", CHECKER),
    Mutant("spectheory/testing/checks/lossless.py",
           "else (inst.exact and how.spec.exact",
           "else (inst.exact",
           "battery: float-only verifiers run in exact mode on exact instances",
           ("tests/test_testing_lossless.py",)),
    # ---------------------------------------------------------------- law validation
    Mutant("spectheory/law.py",
           "    err = np.abs(tot - 1)\n",
           "    err = tot - 1\n",
           "float stop sums checked on one side only (sums below 1 pass)", LAWS),
    Mutant("spectheory/law.py",
           "        bad = rows != 1\n",
           "        bad = rows > 1\n",
           "exact correction rows checked on one side only (rows below 1 pass)", LAWS),
    Mutant("spectheory/law.py",
           "        bad = tot != 1\n",
           "        bad = tot > 1\n",
           "exact stop sums checked on one side only", LAWS),
    Mutant("spectheory/law.py",
           '("negative", a < 0)',
           '("negative", a < -tol)',
           "float laws: negative entries down to -tol accepted", LAWS),
    Mutant("spectheory/law.py",
           "    err = np.abs(rows - 1)\n",
           "    err = np.abs(rows - 1) / 2\n",
           "float correction rows checked at twice the tolerance", LAWS),
    Mutant("spectheory/engine/nodes.py",
           "bad = (w < 0) | (w > 1)",
           "bad = (w < 0)",
           "exact node weights above 1 not flagged", NODES),
    Mutant("spectheory/engine/nodes.py",
           "ok = bool(lo >= 0) and bool(hi <= 1 + tol)",
           "ok = bool(lo >= 0)",
           "float node weights above 1 pass the fast screen", NODES),
    # ---------------------------------------------------------------- sampler statistics
    Mutant("spectheory/testing/statistics/stats.py",
           "    dof = len(e) - 1\n",
           "    dof = len(e)\n",
           "chi-square with one degree of freedom too many", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "    dof = len(e) - 1\n",
           "    dof = len(e) - 2\n",
           "chi-square with one degree of freedom too few", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "if pooled_e < min_expected and len(e):",
           "if pooled_e <= min_expected and len(e):",
           "pooled bin of expected count exactly 5 merged instead of kept", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "p = min(1.0, 2 * p_global, 2 * m * min(rows_p)) if m else 1.0",
           "p = min(1.0, p_global, m * min(rows_p)) if m else 1.0",
           "Bonferroni family without the split of alpha between the two tests", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "lam = np.minimum(np.array([4.0 * t.n * delta * delta for t in rows]), MAX_NONCENTRALITY)",
           "lam = np.minimum(np.array([2.0 * t.n * delta * delta for t in rows]), MAX_NONCENTRALITY)",
           "stated power from half the non-centrality", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "crit = chi2.isf(alpha / (2 * m), dofs)",
           "crit = chi2.isf(alpha / 2, dofs)",
           "stated power of the per-row tests without the Bonferroni factor m", STATS),
    Mutant("spectheory/testing/statistics/stats.py",
           "while hi - lo > 1e-5 * hi:",
           "while hi - lo > 1e-1 * hi:",
           "min_detectable_tv bisection stopped at 10% precision", STATS),
    Mutant("spectheory/testing/checks/law_mode.py",
           "n_rows)\n            probs = (stop[b].unsqueeze(-1) * corr[b]).reshape(-1).numpy()",
           "n_rows)\n            probs = corr[b].reshape(-1).numpy()",
           "sampler law mode: cell probabilities without P(k, tau)",
           ("tests/test_testing_sampler.py",)),
    # ---------------------------------------------------------------- LPs
    Mutant("lp/node_budget.py",
           "            M.append(np.minimum(Q[j], reach))",
           "            M.append(reach)",
           "node-budget closed form ignores the draft budget q(s)", LP_NB),
    Mutant("lp/node_budget.py",
           "vals = np.concatenate([np.full(k, one, dtype=dt), -p_levels[j].reshape(-1)])",
           "vals = np.concatenate([np.full(k, one, dtype=dt), p_levels[j].reshape(-1)])",
           "reduced node-budget LP: sign of the parent term flipped", LP_NB),
    Mutant("lp/node_budget.py",
           "        tight_q = M[j] == Q[j]",
           "        tight_q = M[j] <= Q[j]",
           "node-budget dual: every node treated as budget-tight", LP_NB),
    Mutant("lp/certificate.py",
           "upd(\"mono\", (Ms - D_par).max(), max)",
           "upd(\"mono\", (D_par - Ms).max(), max)",
           "matrix-free certificate: monotonicity row checked with the wrong sign", LP_NB),
    Mutant("lp/sparse.py",
           "        if primal != dual:",
           "        if primal < dual:",
           "exact certificate: strong duality checked on one side only", LP_NB + (KILLS,),
           equivalent="the check runs after primal and dual feasibility, where weak duality "
                      "gives c.x <= b.y: primal > dual cannot occur, so != and < agree"),
    Mutant("lp/sparse.py",
           "        if any(v < 0 for v in lam):",
           "        if any(v < 0 for v in y_eq):",
           "exact certificate: sign checked on the (free) equality multipliers instead of the "
           "inequality multipliers", LP_NB + (KILLS,)),
    Mutant("lp/sparse.py",
           "        bad = np.flatnonzero(aty < self.c)",
           "        bad = np.flatnonzero(aty < self.c - 1)",
           "exact certificate: dual feasibility with slack 1", LP_NB + (KILLS,)),
    Mutant("lp/direct.py",
           "        c[n_z + blk_off[j]:n_z + blk_off[j + 1]] = j * one",
           "        c[n_z + blk_off[j]:n_z + blk_off[j + 1]] = (j - 1) * one",
           "direct LP objective E[tau] instead of E[tau + 1]", LP_DIRECT),
    Mutant("lp/direct.py",
           "            used = used + qroot[f]",
           "            used = used + qpath[x]",
           "direct LP, norep outcomes: renormalised by path mass instead of first-token mass",
           LP_DIRECT),
    Mutant("lp/direct.py",
           "    prob = prob * (coef.astype(object) if exact else coef)",
           "    prob = prob",
           "direct LP, iid outcomes: multinomial coefficient dropped", LP_DIRECT),
    Mutant("lp/coupling.py",
           "        total = total + np.minimum(Q[i], P[i]).sum()",
           "        total = total + np.maximum(Q[i], P[i]).sum()",
           "coupling bound with max instead of min", LP_NB + ("tests/test_lp_direct.py",)),
    Mutant("lp/multipath.py",
           "    return 1 - (1 - qS) ** K",
           "    return 1 - (1 - qS) ** (K - 1)",
           "multi-path relaxation: coverage of K - 1 paths", ("tests/test_lp_multipath.py",)),
    # ---------------------------------------------------------------- sampler reports
    Mutant("spectheory/testing/statistics/stats.py",
           "    pooled_o = n - impossible - o.sum()",
           "    pooled_o = n - o.sum()",
           "pooled chi-square bin counting the samples on impossible outcomes", REPORTS),
    Mutant("spectheory/testing/statistics/budget.py",
           "    m = len(ns)",
           "    m = int(keep.sum())",
           "budget's Bonferroni m without the rows that have no test (check_sampler counts them)",
           REPORTS),
    Mutant("spectheory/testing/checks/calls.py",
           "            per = max(need)",
           "            per = min(need)",
           "too few samples: the count stated for a test of every row from the easiest row",
           REPORTS),
    Mutant("spectheory/testing/checks/law_mode.py",
           "        if pv > alpha:",
           "        if pv >= 0:",
           "law-mode hint given whatever the counts fit", REPORTS),
    Mutant("spectheory/testing/checks/law_mode.py",
           "    return fam.p_value if fam.dof > 0 else 0.0",
           "    return fam.p_value",
           "law-mode hint: a law with no degree of freedom said to fit", REPORTS),
    Mutant("spectheory/testing/checks/coins_mode.py",
           "                entry[0] += int(bad.sum())",
           "                entry[0] += 1",
           "coins modes: a block's differing rows counted once", REPORTS),
    Mutant("spectheory/testing/checks/report.py",
           "        value = getattr(f, name, None)\n        if value is not None:\n            return value",
           "        return getattr(f, name, default)",
           "declared attributes not followed through __wrapped__ / partial", REPORTS),
    Mutant("spectheory/testing/checks/calls.py",
           "            mdt = stats.point_mass_tv(n, POWER)",
           "            mdt = stats.point_mass_tv(n + 1, POWER)",
           "point-mass rows: detection figure from one sample more than a row has", REPORTS),
    Mutant("spectheory/runtime/errors.py",
           "        os._exit = _exit_guard[0]\n",
           "        pass\n",
           "os._exit left replaced after a user call", REPORTS),
    # real-size laws: the buffer pool and GBV's per-path passes
    Mutant("spectheory/runtime/buffers.py",
           "return sys.getrefcount(_pool[i]) <= 2",
           "return sys.getrefcount(_pool[i]) <= 3",
           "buffer pool: a buffer that one view still holds counted as free (overwritten)", BUFFERS),
    Mutant("spectheory/runtime/buffers.py",
           "if nbytes <= size <= 2 * nbytes and _free(i)",
           "if nbytes <= size <= 4 * nbytes and _free(i)",
           "buffer pool: a request served by a buffer over twice its size", BUFFERS),
    Mutant("spectheory/verifiers/gbv.py",
           "A[i + 1] = Ai + xi * below[i, toks[i]]",
           "A[i + 1] = Ai + below[i, toks[i]]",
           "GBV per-path law: A-update without the path mass x", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "    j = last + 1  # positions",
           "    j = max(last, 0)  # positions",
           "GBV per-path law: the last sorted row taken by the formula for unsorted rows", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "h[:L], c = block_rows(w[:L], qg",
           "h[:L], c = block_rows(w[1:L + 1], qg",
           "GBV per-path law: block states shifted by one position", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "below[i].zero_()  # a row",
           "pass  # a row",
           "GBV per-path law: a negligible row before a sorted one reads a stale scratch row",
           REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "            pos = torch.sub(V - 1, pos, out=pos if scratch is not None else None)",
           "            pos = pos",
           "GBV rank order of one row: positions of the reversed row not mapped back", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "        if not (a <= 0 or xq_tok >= a * half_eps):",
           "        if not (a <= 0 or xq_tok <= a * half_eps):",
           "GBV per-path law: the screen's cheap pre-check inverted, so rows that need no sort "
           "are sorted (same values; the test counts the rows the screen passes)", REAL),
    # GBV's compiled CPU kernels (numba) and their route
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        a = V - 1 - m if ties_low else m\n        k = keys[a]\n        d = k & _MASK",
           "        a = m if ties_low else V - 1 - m\n        k = keys[a]\n        d = k & _MASK",
           "GBV kernels: float32 rank order with the tie rules swapped", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        d = e >> np.uint64(32 + _DIGIT)",
           "        d = (e >> np.uint64(32 + _DIGIT - 1)) & np.uint64(_MASK)",
           "GBV kernels: float32 radix sort's second digit read one bit low", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "                a = V - 1 - m if ties_low else m\n                k = keys[a]",
           "                a = m if ties_low else V - 1 - m\n                k = keys[a]",
           "GBV kernels: float64 rank order with the tie rules swapped", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "            if c == V:\n",
           "            if c == V - 1:\n",
           "GBV kernels: float64 pass also skipped where all keys but one share its digit",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        below[t] = acc\n        acc += q[t]",
           "        acc += q[t]\n        below[t] = acc",
           "GBV kernels: mass at or below a token instead of strictly below", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "            out[a] = out[a] * ud[a] + w",
           "            out[a] = out[a] * below[a] + w",
           "GBV kernels: Horner step multiplies by u instead of u + d (K >= 3 only)", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "    den = _power_sum(A, x, K, x)",
           "    den = _power_sum(x, x, K, x)",
           "GBV kernels: the skew denominator S_K(A, x) with x for A", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "odd |= (k > inf) | ((k < sign) & (k != minus_one))",
           "odd |= (k > inf)",
           "GBV kernels: a -0.0 or negative ratio not flagged (bit order then ranks it wrongly)",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        out[k] = V - 1 - at",
           "        out[k] = V - at",
           "GBV kernels: root rank positions off by one", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "A[i + 1] = a_i + x_i * b_tok",
           "A[i + 1] = a_i + b_tok",
           "GBV kernels' route: A-update without the path mass x", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        if i >= j or skipped[i]:",
           "        if i >= j:",
           "GBV kernels' route: a negligible row before a sorted one left as the scratch held it",
           KERNELS),
    Mutant("spectheory/verifiers/gbv.py",
           "    if other is not None and not (B.is_torch(other) and other.dtype == rows.dtype",
           "    if other is not None and not (B.is_torch(other)",
           "GBV kernels' route taken with p of another dtype than q", KERNELS),
    Mutant("spectheory/runtime/_kernels.py",
           "        except Exception as err:  # noqa: BLE001",
           "        except ImportError as err:  # noqa: BLE001",
           "compiled kernels that fail to load (no numba cache) make every GBV law raise",
           KERNELS),
    Mutant("spectheory/verifiers/gbv.py",
           "if q_rows.numel() and not float(q_rows.amin()) > 0:",
           "if q_rows.numel() and float(q_rows.amin()) <= 0:",
           "GBV torch route: zeros beside a NaN keep ratio p/0", KERNELS),
    # the state around the sampler: penalties, masks and grammars on each row's history
    Mutant("spectheory/inputs/stateful.py",
           "x = np.where(pen & (x > 0), x / rep, np.where(pen, x * rep, x))",
           "x = np.where(pen & (x > 0), x * rep, np.where(pen, x / rep, x))",
           "repetition penalty: the two branches swapped", STATEFUL),
    Mutant("spectheory/inputs/stateful.py",
           "x = x - freq * c - pres * seen",
           "x = x - freq * seen - pres * c",
           "frequency and presence penalties swapped (count vs seen)", STATEFUL),
    Mutant("spectheory/inputs/stateful.py",
           "shift = np.where(ok, (np.where(ok, hi, 0) + np.where(ok, lo, 0)) / 2, 0.0)",
           "shift = np.where(ok, np.where(ok, hi, 0), 0.0)",
           "the kit's logits shifted by the maximum (every logit <= 0: one branch of "
           "repetition_penalty never runs)", STATEFUL),
    Mutant("spectheory/inputs/stateful.py",
           "    if sp.min_tokens and n < sp.min_tokens:",
           "    if sp.min_tokens and n <= sp.min_tokens:",
           "min_tokens: the stop token masked one token too long", STATEFUL),
    Mutant("spectheory/inputs/stateful.py",
           "    key = history[:, m - n + 1:]  # [N, n-1]",
           "    key = history[:, m - n:]  # [N, n-1]",
           "no-repeat n-grams keyed on n tokens instead of n-1", STATEFUL),
    Mutant("spectheory/inputs/processing.py",
           "                                             history=all_prefixes(d, base.vocab_size)))",
           "                                             history=all_prefixes(d, base.vocab_size)"
           "[::-1]))",
           "a processed table level reads its histories in the wrong order", STATEFUL),
    Mutant("spectheory/testing/checks/step.py",
           "    return torch.stack([processed(rows[:, j], params, inputs, history=tokens[:, :j])",
           "    return torch.stack([processed(rows[:, j], params, inputs, history=tokens[:, :0])",
           "the kit's correct steps penalise every position from an empty history", PENALISED),
    Mutant("spectheory/testing/checks/step.py",
           '    return "logits" if sp is not None and sp.on_logits else "probs"',
           '    return "probs"',
           "check_step hands probabilities when the penalties act on logits", PENALISED),
    Mutant("spectheory/testing/checks/seeds.py",
           "    diff = (ref != got)",
           "    diff = (ref != ref)",
           "seeded checks compare the reference with itself", SEEDS),
    Mutant("spectheory/testing/checks/seeds.py",
           "                row_seeds[len(sel):] ^= COMPANION  # other requests, from the same "
           "contexts",
           "                pass",
           "batch invariance: companion rows share the rows' seeds (the same requests twice)",
           SEEDS),
    Mutant("spectheory/inputs/grammar_engines.py",
           "        if m.is_stopped():  # a complete match that cannot go on: the engine ends here\n"
           "            row[self.eos] = END",
           "        if m.is_stopped():  # a complete match that cannot go on: the engine ends here\n"
           "            pass",
           "llguidance: a stopped matcher allows nothing (its mask is empty)", GRAMMARS),
    Mutant("spectheory/inputs/stateful.py",
           "                    if self._pattern.fullmatch(text) is not None:",
           "                    if self._pattern.fullmatch(text, partial=True) is not None:",
           "regex grammars: the stop token allowed before a complete match", GRAMMARS),
    Mutant("spectheory/testing/engines/ports/tgi.py",
           "            history = seq[:, :n + j] if fixed else ctx  # as released: input_ids, every j",
           "            history = seq[:, :n + j]",
           "the TGI port as released already fixed (its seam bug gone)", PORTS),
    Mutant("spectheory/testing/engines/ports/mistralrs.py",
           "    if version != \"released\" and not greedy:",
           "    if not greedy:",
           "the mistral.rs port as released already samples plainly", PORTS),
    # defect classes of the conformance kit, the relaxed rules, trees, the KL frontier and the
    # claims ledger that the suite once let through
    Mutant("spectheory/testing/checks/step.py",
           "    crit = chi2.isf(alpha / 2, dof)\n    return max(hit,",
           "    crit = chi2.isf(alpha, dof)\n    return max(hit,",
           "detection_power: the instance's test at alpha instead of alpha/2 (Bonferroni split "
           "dropped: the power is overstated)", (DEFECTS,)),
    Mutant("spectheory/testing/designs/sharp.py",
           "        crit = chi2.isf(alpha / (2 * m), d)",
           "        crit = chi2.isf(alpha / 2, d)",
           "replica_power: the per-row tests at alpha/2 instead of alpha/(2m) (power overstated)",
           (DEFECTS,)),
    Mutant("spectheory/testing/checks/step.py",
           "        e = torch.empty_like(q).exponential_(generator=g_draft)",
           "        e = torch.empty_like(q).uniform_(generator=g_draft)",
           "the kit's vLLM-V1-like step drafts argmax q/U with U uniform instead of Exp(1) "
           "(drafts off q, verified as if from q)", ("tests/test_penalised_steps.py", DEFECTS)),
    Mutant("spectheory/testing/statistics/stats.py",
           "    expected = n * probs / tot if tot > 0 else np.zeros_like(probs)",
           "    expected = n * probs if tot > 0 else np.zeros_like(probs)",
           "row chi-square: float laws not normalised (expected counts off their sum)",
           (DEFECTS,)),
    Mutant("spectheory/testing/checks/calls.py",
           "        ids = ids[torch.randperm(len(ids), generator=generator)]\n",
           "        ids = ids\n",
           "law mode hands the draft rows in blocks instead of interleaved (a sampler that mixes "
           "up the rows of a batch is seen only at block edges)", (DEFECTS,)),
    Mutant("spectheory/testing/checks/calls.py",
           "            n = min(t.n for t in tests)",
           "            n = tests[0].n",
           "point-mass rows: detection figure from the first row (the most samples) instead of "
           "the row with the fewest", (*REPORTS, DEFECTS)),
    Mutant("spectheory/testing/pytest_plugin.py",
           "        if \"alpha\" in params and \"alpha\" not in given:",
           "        if \"alpha\" in params:",
           "pytest plugin: --spectheory-alpha overrides a call's explicit alpha", PLUGIN),
    Mutant("spectheory/testing/pytest_plugin.py",
           "        if \"seed\" in params and \"seed\" not in given:",
           "        if \"seed\" in params:",
           "pytest plugin: --spectheory-seed overrides a call's explicit seed", PLUGIN),
    Mutant("spectheory/testing/pytest_plugin.py",
           "            elif \"samples\" not in given and \"budget_s\" not in given:",
           "            elif \"budget_s\" not in given:",
           "pytest plugin: --spectheory-samples / --spectheory-budget override a call's explicit "
           "samples", PLUGIN),
    Mutant("spectheory/testing/engines/engine_sampling.py",
           "cut = torch.searchsorted(cdf, bound, right=False)",
           "cut = torch.searchsorted(cdf, bound, right=True)",
           "SGLang top-p port: pivot past a cumulative sum equal to 1 - top_p (the token there "
           "dropped)", (DEFECTS,)),
    Mutant("spectheory/testing/checks/coins_mode.py",
           "        relevant = pos.unsqueeze(0) <= (tau + 1).unsqueeze(1)",
           "        relevant = pos.unsqueeze(0) <= tau.unsqueeze(1)",
           "coins mode, token rule: a near-threshold coin at the deciding (rejected) position not "
           "marked ambiguous", (DEFECTS,)),
    Mutant("spectheory/verifiers/hetero.py",
           "tli = sum((min(p[x], q[d] / mass) for d, x in inter.items()), z)",
           "tli = sum((min(p[x], q[d]) for d, x in inter.items()), z)",
           "TLI's first-token acceptance with q restricted to the intersection but not "
           "renormalised", (DEFECTS,)),
    Mutant("spectheory/inputs/tokenizers.py",
           "not any(len(u) > len(text) and u.startswith(text)",
           "not any(len(u) >= len(text) and u.startswith(text)",
           "tokenizer: a string counted as its own proper extension (first token never settled "
           "when the text is a token)", (DEFECTS,)),
    Mutant("spectheory/verifiers/relaxed.py",
           "    lossless = ts == 1 and ta == 1",
           "    lossless = ts == 1 or ta == 1",
           "sglang-threshold declared lossless when only one threshold is 1",
           ("tests/test_parametric_rules.py", DEFECTS)),
    Mutant("spectheory/verifiers/relaxed.py",
           "    kl_ot, e1 = kl_divergence(o, t)",
           "    kl_ot, e1 = kl_divergence(t, o)",
           "KL(output || target) computed as KL(target || output)", (DEFECTS,)),
    Mutant("spectheory/verifiers/sglang_tree.py",
           "        single = active & (px >= threshold_single)",
           "        single = active & (px > threshold_single)",
           "sglang-tree: a child whose target probability equals threshold_single not accepted "
           "outright", (DEFECTS,)),
    Mutant("lp/frontier.py",
           "    tvb = math.sqrt(delta / 2)",
           "    tvb = math.sqrt(2 * delta)",
           "KL frontier: Pinsker radius sqrt(2 KL) (the L1 form) instead of sqrt(KL / 2) for TV",
           (DEFECTS,)),
    Mutant("lp/claims/__init__.py",
           "    chosen = [c for c in rows if key in c.id.lower() or key in c.source.lower()]",
           "    chosen = [c for c in rows if key in c.id.lower()]",
           "claims --only: the source no longer matched", (DEFECTS,)),
    Mutant("lp/claims/common.py",
           "        if self.L is not None and fact.L not in self.L:",
           "        if self.L is not None and fact.L < min(self.L):",
           "claim hypotheses: a block length above the row's allowed L admitted", (DEFECTS,)),
    Mutant("spectheory/testing/statistics/budget.py",
           "        return point_mass_tv(min(ns), power)",
           "        return point_mass_tv(max(ns), power)",
           "budget's planned figure for point-mass rows from the row with the most samples",
           (DEFECTS,)),
    Mutant("spectheory/testing/checks/step.py",
           "        n_min = min(per)",
           "        n_min = per[0]",
           "check_step, greedy: detection figure from the first instance (the most samples)",
           (DEFECTS,)),
    Mutant("lp/frontier.py",
           "cp.sum(cp.rel_entr(out[np.nonzero(keep)[0]], target[keep])) <= delta]",
           "cp.sum(cp.rel_entr(target[keep], out[np.nonzero(keep)[0]])) <= delta]",
           "KL frontier: the budget constrains KL(target || output) instead of KL(output || "
           "target)", (DEFECTS,)),
    Mutant("lp/claims/__init__.py",
           "    key = only.lower()",
           "    key = only",
           "claims --only: matching case-sensitive", (DEFECTS,)),
    # ---------------------------------------------------------------- compiled node kernels
    Mutant("spectheory/engine/_nodes_cpu.py",
           "r = _mul_add(-pa, w, qa, fma_neg)",
           "r = _mul_add(pa, w, qa, fma_neg)",
           "node kernels, block: the residual q - w p with the sign of p flipped", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "stop_L[i] = qw * m",
           "stop_L[i] = qa * m",
           "node kernels, block: m_L without the weight h_L (q instead of q h_L)", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "            r = pa - qa",
           "            r = qa - pa",
           "node kernels, token: residual max(q - p, 0) instead of max(p - q, 0)", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "a0 += row[i * width + j]",
           "a0 += row[i * width]",
           "node kernels: torch-order row sum reads lane 0 for every lane of the remainder",
           FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "lane = ((a0 + a1) + a2) + a3",
           "lane = (a0 + a1) + (a2 + a3)",
           "node kernels: the four accumulators combined in another order than torch's "
           "(the same sum up to rounding: bit-for-bit tests must see it)", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "return abs((a0 + a1) + (a2 + a3) - 1.0) <= half",
           "return abs((a0 + a1) + (a2 + a3) + 1.0) <= half",
           "node kernels: the screen of a fallback row's sum tests -1 instead of 1", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "terms[a] = abs(top - pa * Tx)",
           "terms[a] = abs(top - pa * Ax)",
           "node kernels, output law: the TV term against A instead of the target law T", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "        _store_fence()\n    return top_exponent != _EXPONENT",
           "        _store_fence()\n    return True",
           "node kernels, output law: a non-finite top target row not flagged", FLOOR),
    # ---- exact plans in integers over one denominator, and batch reuse (same values)
    Mutant("spectheory/engine/drafttrees.py",
           "left = np.where(used, 0, rows).sum(axis=1)  # d (1 - q(used)) as an integer",
           "left = rows.sum(axis=1)  # d (1 - q(used)) as an integer",
           "draft trees, exact outcome weights, norep: sibling weights not renormalised", TREES),
    Mutant("spectheory/verifiers/coupling.py",
           "                coef //= factorial(c)",
           "                coef //= 1",
           "outcomes (iid, integers): a repeated token's multiplicity not divided out", ("tests/test_hu.py", "tests/test_multidraft_ot.py", "tests/test_multipath.py")),
    Mutant("spectheory/verifiers/coupling.py",
           "                        total += -val if (r - s) % 2 else val",
           "                        total += val",
           "set_law (integers): inclusion-exclusion without its signs",
           ("tests/test_multipath.py", "tests/test_claims_independent.py")),
    Mutant("spectheory/verifiers/hu.py",
           "            reject[S] = Fraction(P - sum(flow[S].values()), P)",
           "            reject[S] = Fraction(P - sum(flow[S].values()), d)",
           "hu plan (integers): rejection over the common denominator, not over P(S)", ("tests/test_hu.py", "tests/test_multidraft_ot.py", "tests/test_multipath.py")),
    Mutant("spectheory/verifiers/khisti.py",
           "                sel[y] += F[y] * (unit // n)",
           "                sel[y] += F[y] * unit",
           "khisti plan (integers): the selected law's terms not divided by the distinct tokens",
           ("tests/test_hu.py", "tests/test_multidraft_ot.py", "tests/test_multipath.py")),
    Mutant("spectheory/verifiers/global_resolution.py",
           "            plain[D] = Fraction(c_in, tot)",
           "            plain[D] = Fraction(1, tot)",
           "Global Resolution plan: an inner set's rejection 1 / (1 + sum w) not scaled to the "
           "integer weights", ("tests/test_multipath.py", "tests/test_claims_independent.py")),
    Mutant("spectheory/verifiers/coupling.py",
           "        xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]",
           "        xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else 0 for i in range(0, len(xs), 2)]",
           "exact_sum: the odd term of a round of pairs dropped",
           ("tests/test_multipath.py", "tests/test_claims_independent.py")),
    Mutant("spectheory/engine/sampling.py",
           "    k, tau, y = sample_output((stop[back], corr[back]), generator)",
           "    k, tau, y = sample_output((stop[back.flip(0)], corr[back.flip(0)]), generator)",
           "sample_outputs: the law of each distinct outcome read back for the wrong samples",
           ("tests/test_multipath_sampling.py", "tests/test_core_sampling.py")),
    Mutant("spectheory/verifiers/gbv.py",
           "                corr[b] = corr[b0]",
           "                pass",
           "GBV path reuse: the weights copied, the corrections not", GBV),
    Mutant("spectheory/testing/statistics/_chisq.py",
           "            return _sc.chdtrc(np.asarray(df), xa)",
           "            return _sc.chdtr(np.asarray(df), xa)",
           "chi-square tail: the CDF where the survival function is meant",
           ("tests/test_sampler_budget.py",)),
    Mutant('spectheory/testing/checks/calls.py',
           '    if t.device.type == "meta":\n        return None, f"{name} on the meta device (a shape without values)"\n',
           '',
           'kit outputs: tensors on the meta device read as if they held values',
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/testing/checks/sampler.py',
           '    seed = kit_seed(seed)\n    call = dict(locals())',
           '    call = dict(locals())',
           'check_sampler: the seed not validated (-3 and 1.5 run as other seeds)',
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/testing/checks/step.py',
           '    seed = kit_seed(seed)\n    if not callable(step):',
           '    if not callable(step):',
           'check_step: the seed not validated',
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/testing/checks/step.py',
           '            m = PILOT_ROWS  #',
           '            m = m  #',
           "check_step: no small first call, the run's time projected only after 2^16 rows",
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/runtime/errors.py',
           '        with contextlib.redirect_stdout(_kept_stderr()):\n            out = fn(',
           '        with contextlib.nullcontext():\n            out = fn(',
           "call_user: user code's prints on standard output (breaks --json)",
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/testing/step_cli.py',
           '    add_time_limit_option(p)  # also stops a step call',
           '    pass  # also stops a step call',
           'check-step: no --time-limit (a step that never returns hangs the command)',
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/runtime/limits.py',
           'body = s[1:] if s[:1] in "+-" and len(s) > 1 else s',
           'body = s',
           "parse_count: a signed count called 'not an integer'",
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/cli/commands.py',
           'if not (digits.isascii() and digits.isdigit()):',
           'if not digits.isdigit():',
           "integer options: other scripts' digits read as numbers",
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/testing/checks/tree.py',
           'remedy="use a narrower or shallower tree, or give instances of your own "\n'
           '                      "(--instance FILE)")',
           'remedy=None)',
           "tree check: a deep tree's refusal advises --max-sequences, which check-sampler lacks",
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/runtime/limits.py',
           '            call[2] = True\n',
           '',
           'long user calls: noted again every second instead of once',
           ('tests/test_hostile_kit_2026.py',)),
    Mutant('spectheory/runtime/limits.py',
           '            if left == 0 or left > RETRY_AFTER_COLLECTION:',
           '            if False:',
           'time limit: a backstop deferred in a collection not re-armed at its end',
           ('tests/test_hostile_inputs.py',)),
    Mutant('spectheory/registry.py',
           '            spec = dataclasses.replace(spec, function=GuardedFunction(verifier, spec.name))',
           '            pass',
           'a verifier function handed over in Python called without the user-code guard',
           ('tests/test_hostile_api_2026.py',)),
    Mutant('spectheory/inputs/instances.py',
           'parse_json(text, name, exact_numbers=bool(exact))',
           'parse_json(text, name)',
           'exact mode reads a JSON number by its float (1e-400 read as 0)',
           ('tests/test_hostile_api_2026.py',)),
    Mutant('spectheory/inputs/instances.py',
           '        if not _NUMBER_TEXT.fullmatch(text.strip()):\n            raise ValueError(text)\n',
           '',
           "instance entries: other scripts' digits and underscores accepted",
           ('tests/test_hostile_api_2026.py',)),
    Mutant('spectheory/inputs/instances.py',
           '    if big is not None and big > 128:',
           '    if False:',
           'messages: an entry of thousands of digits printed (str() raises)',
           ('tests/test_hostile_api_2026.py',)),
    Mutant('spectheory/inputs/stateful.py',
           '        refuse_duplicate_tokens(tokens, name)\n',
           '',
           'regex grammar: two ids spelling one string accepted (llguidance masks one of them)',
           ('tests/test_hostile_sampling_state.py',)),
    Mutant('spectheory/inputs/stateful.py',
           '        if s.size and (s.min() < -1 or s.max() >= self.n_states):',
           '        if s.size and s.max() >= self.n_states:',
           "TokenAutomaton: a negative state wraps to another state's row",
           ('tests/test_hostile_sampling_state.py',)),
    Mutant('spectheory/runtime/limits.py',
           '    if value in MALLOC_SETTINGS:',
           '    if True:',
           'SPECTHEORY_MALLOC: a typo accepted',
           ('tests/test_hostile_sweep_env.py',)),
    Mutant('spectheory/sweep/runner.py',
           '        if held["name"] != cfg.name:',
           '        if False:',
           "sweep folders: another sweep's folder overwritten",
           ('tests/test_hostile_sweep_env.py',)),
    Mutant('spectheory/bounds.py',
           '            if abs(total - 1.0) > ROW_SUM_TOL:',
           '            if False:',
           'bounds: a float row not summing to 1 accepted',
           ('tests/test_hostile_bounds_lp.py',)),
    Mutant('spectheory/bounds.py',
           '    if count is None or count > MAX_SUBSET_STEPS:',
           '    if False:',
           'bounds: the norep subset enumeration unbounded',
           ('tests/test_hostile_bounds_lp.py',)),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "diff[x] = row_sum(terms, lanes)",
           "diff[x] = row_sum(terms, 1)",
           "node kernels, output law: a node's TV terms summed in another order than torch's row "
           "sum (equal for short rows: only a wide-range row test sees it)", FLOOR),
    Mutant('spectheory/testing/designs/sharp.py',
           '        return _args.real(name, value, 0.0, 1.0, hi_open=False)',
           '        return float(value)',
           'sharp designs: a NaN or negative generic_tv/bonus_tv accepted (a negative TV squares to a positive requirement)',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '        off = np.abs(sums - 1.0) > CELL_SUM_TOL',
           '        off = np.abs(sums - 1.0) > math.inf',
           'allocate: reference or replica rows that do not sum to 1 accepted',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '        if like is not None and a.shape != like[g].shape:',
           '        if False:',
           "allocate: a replica's rows of another shape than the reference's reach binned_divergence",
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '    if bonus_tv is not None and bonus is None:',
           '    if False:',
           'allocate: bonus_tv without bonus silently ignored',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '    return _args.count("budget", budget, 1, MAX_BUDGET)',
           '    return _count("budget", budget)',
           'sharp designs: a budget of 10^30 reaches numpy as an object array',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '                list(p.shape) != lead + [L + 1, V]:',
           '                False:',
           'predicted_power: rows whose p has another shape reach the verifier (an IndexError)',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '    if isinstance(replicas, tuple) and len(replicas) == 2 and isinstance(replicas[0], str) \\',
           '    if False and isinstance(replicas, tuple) and len(replicas) == 2 and isinstance(replicas[0], str) \\',
           'predicted_power: one (name, law) pair given as the list named as a replica that is a str',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/designs/sharp.py',
           '        if K is not None and paths != K:',
           '        if False:',
           "predicted_power: paths that differ from the rows' path count ignored",
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/statistics/stats.py',
           '        if not isinstance(t, RowTest):',
           '        if False:',
           'stats.family: an item that is not a RowTest fails inside (AttributeError)',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/statistics/stats.py',
           '        _args.real(f"{where}.p_value", t.p_value, 0.0, 1.0, lo_open=False, hi_open=False)',
           '        pass',
           'stats.family: a NaN or negative p-value accepted',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/statistics/stats.py',
           '                             min(float(lam.sum()), MAX_NONCENTRALITY)))',
           '                             float(lam.sum())))',
           "stats.family_power: a non-centrality past scipy's range gives a NaN power",
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/statistics/budget.py',
           '    if samples < len(rows):',
           '    if False:',
           'planned_tv: fewer samples than rows answered (inf) instead of refused',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('spectheory/testing/statistics/budget.py',
           '    budget_s = check_budget(budget_s)',
           '    budget_s = float(budget_s)',
           'size_run: a negative or NaN budget sized a run',
           ('tests/test_hostile_designs_args.py',)),
    Mutant('lp/cli.py',
           '    p._negative_number_matcher = NEGATIVE_NUMBER',
           '    pass',
           "lp --tv -1/20: read as an option, the budget's own message lost",
           ('tests/test_hostile_designs_args.py',)),
    # ---- compiled node kernels of the shallower depths and of the scans up
    Mutant("spectheory/engine/_nodes_cpu.py",
           "r = _mul_add(-pf[i], w, qa, fma_neg)",
           "r = _mul_add(pf[i], w, qa, fma_neg)",
           "node kernels, block at depths < L-1: the residual with the sign of p flipped",
           FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "            child_state[i] = w",
           "            child_state[i] = 1.0",
           "node kernels, block at depths < L-1: the children's running weight reset to 1",
           FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "            child_R[i] = rx",
           "            child_R[i] = ax",
           "node kernels, token at depths < L-1: the children's pass product without the "
           "parent's", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "terms[a] = qf[i] * ((1.0 - h_child[i]) * G_child[i])",
           "terms[a] = qf[i] * (1.0 - h_child[i])",
           "node kernels, block's scan up: G_d without the children's G_{d+1}", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "stop[x] = (mass[x] * R[x]) * (1.0 - row_sum(terms, lanes))",
           "stop[x] = mass[x] * (1.0 - row_sum(terms, lanes))",
           "node kernels, token's stop masses at depths < L-1 without the pass product R_d",
           FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "            T_out[i] = Tx * pa",
           "            T_out[i] = pa",
           "node kernels, output law's shallower levels: the target law loses its prefix mass",
           FLOOR),
    # ---- eight-lane kernels of the deepest rows, and the finite screen they carry
    Mutant("spectheory/engine/_nodes_cpu.py",
           "            dest[i] = flat[i] * tops[e]\n    return top_exponent != _EXPONENT",
           "            dest[i] = flat[i] * tops[e]\n    return True",
           "node kernels, output law entry by entry (V = 3): a non-finite top target row not "
           "flagged", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           '        return _reduce(builder, "umax", exponents)',
           "        return ir.Constant(ir.IntType(64), 0)",
           "node kernels, output law by vectors: the finite screen of the top target rows "
           "dropped", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "        top = builder.fadd(av, sv)",
           "        top = builder.fsub(av, sv)",
           "node kernels, output law by vectors: m_L subtracted from A_L", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           'negv = builder.select(builder.fcmp_ordered(">", r, zero), zero, r)',
           'negv = builder.select(builder.fcmp_ordered("<", r, zero), zero, r)',
           "node kernels, block by vectors: the positive part of the residual kept", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           '    fields = builder.select(builder.icmp_unsigned(">", fq, fp), fq, fp)',
           "    fields = fq",
           "node kernels by vectors: the finite screen reads q only (a non-finite target row "
           "at depth L-1 passes)", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "        return (((0.0 + (r0 + r4)) + (r1 + r5)) + (r2 + r6)) + (r3 + r7)",
           "        return (((0.0 + (r0 + r4)) + (r1 + r5)) + (r3 + r7)) + (r2 + r6)",
           "node kernels: rows of 8 summed in another order than torch's (4 lanes)", FLOOR),
    Mutant("spectheory/engine/_nodes_cpu.py",
           "        builder.store(builder.fdiv(vec, _splat(builder, args[4])),",
           "        builder.store(builder.fmul(vec, _splat(builder, args[4])),",
           "node kernels by vectors: the residual multiplied by its total instead of divided",
           FLOOR),
    Mutant("spectheory/engine/analysis.py",
           "        if not checked and screen != [True]:  # the tables at depth L-1 not known finite",
           "        if False:",
           "exact analysis: a non-finite table at depth L-1 flagged by the kernels not checked "
           "(a diagnosis of the node quantities, or a NaN answer)", FLOOR),
    Mutant("spectheory/engine/nodes.py",
           "        finite[0] = _finite_screen(_flat(q)) and _finite_screen(_flat(p))",
           "        finite[0] = True",
           "per-node route, rows that are not whole vectors: the tables at depth L-1 not "
           "screened", FLOOR),
    Mutant("spectheory/engine/plan.py",
           "(instance.draft, (L - 1,))",
           "(instance.draft, (L - 2, L - 1))",
           "instance check: the draft table at depth L-2, which no kernel screens, skipped",
           FLOOR),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "power = max(4, _ceil_log2(n4) // 4)",
           "power = max(3, _ceil_log2(n4) // 4)",
           "real-size correction rows: torch's cascade levels 2^3 steps apart, not 2^4",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "            levels[e % LANES] += r",
           "            levels[LANES + e % LANES] += r",
           "real-size correction rows: the vectors past the last whole step added to accumulator "
           "1, not 0",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        _write_block_fused(q, qo, p, po, out, oo, count, w, total)",
           "        _write_block(q, qo, p, po, out, oo, count, w, total)",
           "real-size correction rows by vectors: block's written residual rounded twice where "
           "its sum's (and torch's) rounds once",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "if seen >= BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):\n"
           "            return False\n        write_row(",
           "if seen > BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):\n"
           "            return False\n        write_row(",
           "real-size correction rows: an infinite entry not left to torch",
           ROWS, equivalent=ROWS_GUARD),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        write_row(COPY if total == 0 else kind,",
           "        write_row(kind,",
           "real-size correction rows: a residual of total zero divided (NaN) instead of p",
           ROWS),
    Mutant("spectheory/verifiers/compiled_rows.py",
           "return mod, mod.TOKEN if w is None else (mod.BLOCK_FUSED if fused else mod.BLOCK)",
           "return mod, mod.TOKEN if w is None else (mod.BLOCK if fused else mod.BLOCK_FUSED)",
           "real-size correction rows: block's q - p w rounded twice where torch rounds once",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        if kind != TOKEN and not (wr >= 0 and wr <= 1):\n            return False\n"
           "        qr, pr = qo + r * qs, po + r * ps",
           "        if False:\n            return False\n"
           "        qr, pr = qo + r * qs, po + r * ps",
           "real-size correction rows: a NaN weight not left to torch (the kernels' min(., 0) "
           "drops it where torch's clamp keeps it)",
           ROWS, equivalent=ROWS_GUARD),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "    total = tail  # 0 + the entries",
           "    total = -tail  # 0 + the entries",
           "real-size correction rows: the entries past the last whole vector subtracted",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        d = _fma32(-pe, w, qe)",
           "        d = -pe * w + qe",
           "real-size correction rows entry by entry: block's residual rounded twice where torch "
           "rounds once",
           ROWS),
    Mutant("spectheory/verifiers/specinfer.py",
           "        if compiled_corrections(None, p2[r0:r1], q2[r0:r1], o2[r0:r1]) is not None:",
           "        if compiled_corrections(None, q2[r0:r1], p2[r0:r1], o2[r0:r1]) is not None:",
           "SpecInfer's residual chain by the compiled rows: max(q - p, 0) instead of max(p - q, 0)",
           ROWS),
    Mutant("spectheory/verifiers/specinfer.py",
           "        if compiled_corrections(None, p2, q2, out) is not None:  # real vocabularies, float32\n"
           "            return out.reshape(shape)",
           "        if compiled_corrections(None, p2, q2, out) is not None:  # real vocabularies, float32\n"
           "            return p2.reshape(shape)",
           "SpecInfer's later residual steps by the compiled rows: the step's input returned, not "
           "its residual",
           ROWS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "out[a] = (((s + u) * s + w) * s + w * u) * q[a] / den",
           "out[a] = (((s + u) * s + w) * s + w) * q[a] / den",
           "GBV's q^G row at K = 4 in one pass: the last Horner term u^2 instead of u^3",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        for k in range(x.shape[0]):\n            diff |= x[k] ^ y[k]",
           "        for k in range(x.shape[0] - 1):\n            diff |= x[k] ^ y[k]",
           "GBV's shared-root check: the last entry of each block of 4,096 not compared (root "
           "rows that differ there taken as one)",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "                    qg[i, a] = q[i, a] * num / den",
           "                    qg[i, a] = q[i, a] * (num / den)",
           "GBV's q^G rows that need no rank order: q (num / den) instead of (q num) / den",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        r = pv / qv if qv != 0 else one",
           "        r = pv / qv if qv > 0 else one",
           "GBV's block weights on the kernels' route: a negative q^G at the drafted token given "
           "ratio 1 (torch's route divides)",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "A[i + 1] = a_i + x_i * b_tok",
           "A[i + 1] = a_i + x_i * q_tok",
           "GBV on the kernels' route: A grows by x q(X_i) instead of x below(X_i)",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "if screens and not (a <= 0 or xq_tok >= a * half_eps):",
           "if screens and not (a <= 0 or xq_tok <= a * half_eps):",
           "GBV kernels' route: the screen's cheap pre-check inverted, so rows that need no sort "
           "are sorted (same values; the test counts the rows the screen passes)",
           KERNELS),
    Mutant("spectheory/verifiers/token.py",
           "    rows = torch.nonzero(zero).reshape(-1)\n"
           "    if len(rows) > ROW_COPIES:  # many short rows (the exact engine's batches): one gather\n"
           "        out[rows] = p[rows]\n"
           "        return out\n"
           "    for r in rows.tolist():  # row by row: one copy each, where an indexed assignment into\n"
           "        out[r].copy_(p[r])  # these strided rows of a real-size law was slower than the law\n"
           "    return out",
           "    zero = zero.to(res.dtype).unsqueeze(-1)\n"
           "    return out.addcmul_(p, zero)",
           "token and block corrections: rows of total zero patched by + p zero, which adds + 0 to "
           "every other row of the batch (a row's bits then depend on its batch)",
           ROWS),
    Mutant("spectheory/engine/nodes.py",
           "        step = max(n, 1)  # each row in one pass on its own: no chunks needed",
           "        step = step  # each row in one pass on its own: no chunks needed",
           "per-draft law: rows the compiled kernels take still handed over in chunks (the same "
           "values, about a tenth slower at the real-model shape)",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        write_row(COPY, p, po + r * ps, p, po + r * ps, out, oo + r * os, V, np.float32(1),",
           "        write_row(COPY, p, po, p, po, out, oo + r * os, V, np.float32(1),",
           "corrections at depth L by the kernels: every row a copy of the first draft's p",
           ROWS),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "    return builder.select(builder.fcmp_ordered(\">\", d, zero), zero, d)",
           "    return builder.select(builder.fcmp_ordered(\"<\", d, zero), d, zero)",
           "real-size correction rows by vectors: block's clamp drops the -0.0 of a residual "
           "rounded once that underflows (torch's clamp keeps it)",
           ROWS),
    # GBV: the root's q^G row beside its sort, the screen's one-read row total
    Mutant("spectheory/verifiers/gbv.py",
           "f(root.below[int(tok[0])])",
           "f(min(root.below.values()))",
           "GBV kernels' route: the mass below the root token read for another drafted token "
           "(A at depth 1 wrong)", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "kernels.skew_row(qn[0].view(row.dtype), order, f(0), f(1), K, int(toks[0]),",
           "kernels.skew_row(qn[0].view(row.dtype), order, f(0), f(1), max(K - 1, 1), "
           "int(toks[0]),",
           "GBV kernels' route: the root's q^G row computed beside its sort for K - 1 paths",
           REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "None if root_space is None else root_space[sel[0]])",
           "None if root_space is None else root_space[0])",
           "GBV kernels' route: every block's root q^G row kept in the first block's output row",
           REAL),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "if not (0 < af < np.inf and not signed):",
           "if not (0 < af < np.inf):",
           "GBV kernels' route: the screen ignores entries with the sign bit set (a row with a "
           "negative entry may pass)", REAL),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        s += row[a]\n        o |= bits[a]",
           "        s += row[a] * 0.5\n        o |= bits[a]",
           "GBV screen's row total: half the row's sum (the screen's bound too small)", REAL),
    Mutant("spectheory/verifiers/gbv.py",
           "if rows is None or rows.shape[0] != L:",
           "if rows is None:",
           "GBV kernels' route: the per-thread path rows kept across a change of L", REAL),
    # rows that require grad: read as values by every law
    Mutant("spectheory/engine/nodes.py",
           "    q, p = B.values(q, p)\n    if drafts.shape[0] == 0:\n        law = empty_law(p)",
           "    if drafts.shape[0] == 0:\n        law = empty_law(p)",
           "per-draft law: rows that require grad reach the out= writes (a torch traceback)",
           ("tests/test_bad_inputs_2026.py",)),
    Mutant("spectheory/verifiers/gbv.py",
           "    q, p = B.values(q, p)  # rows that require grad: their values (the law",
           "    pass  # rows that require grad: their values (the law",
           "GBV: rows that require grad reach the out= writes (a torch traceback)",
           ("tests/test_bad_inputs_2026.py",)),
    Mutant("spectheory/verifiers/specinfer.py",
           "    q, p = B.values(q, p)\n    if drafts.shape[0] == 0:\n        return empty_law(p)\n"
           "    Bsz, K, L = drafts.shape",
           "    if drafts.shape[0] == 0:\n        return empty_law(p)\n    Bsz, K, L = drafts.shape",
           "SpecInfer: rows that require grad reach the out= writes (a torch traceback)",
           ("tests/test_bad_inputs_2026.py",)),
    Mutant("spectheory/runtime/backend.py",
           "a.detach() if is_torch(a) and a.requires_grad else a",
           "a",
           "values(): rows that require grad passed on as they are",
           ("tests/test_bad_inputs_2026.py", "tests/test_real_rows.py")),
    Mutant("spectheory/registry.py",
           "        q, p = B.values(q, p)\n        check_law_inputs(drafts, q, p, paths=True, ",
           "        check_law_inputs(drafts, q, p, paths=True, ",
           "VerifierSpec.law: rows that require grad passed to the verifier (laws with a "
           "gradient, or torch's traceback)", ("tests/test_bad_inputs_2026.py",)),
    Mutant("spectheory/registry.py",
           "        q, p = B.values(q, p)\n        check_law_inputs(drafts, q, p, paths=not ",
           "        check_law_inputs(drafts, q, p, paths=not ",
           "VerifierSpec.__call__: rows that require grad passed to the verifier",
           ("tests/test_bad_inputs_2026.py",)),
    Mutant("spectheory/verifiers/gbv.py",
           "    q, p = B.values(q, p)  # rows that require grad: their values\n",
           "",
           "GBV best_path: rows that require grad read with autograd on", REAL),
    # block's stop probabilities alone: the sums from one compiled read
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        if seen >= BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):\n"
           "            return False\n    return True",
           "        if seen > BAD_BITS or not (total >= 0 if kind == TOKEN else total <= 0):\n"
           "            return False\n    return True",
           "block's sums alone by the kernels: an infinite entry not left to torch",
           ("tests/test_real_rows.py",), equivalent=ROWS_GUARD),
    Mutant("spectheory/verifiers/_rows_cpu.py",
           "        if kind != TOKEN and not (wr >= 0 and wr <= 1):\n            return False\n"
           "        total, seen = residual_sum(kind, q, qo + r * qs",
           "        total, seen = residual_sum(kind, q, qo + r * qs",
           "block's sums alone by the kernels: a weight outside [0, 1] (NaN) kept",
           ("tests/test_real_rows.py",), equivalent=ROWS_GUARD),
    Mutant("spectheory/verifiers/compiled_rows.py",
           "    wn = np.zeros(n, np.float32) if w is None else w.detach().contiguous().numpy()",
           "    wn = np.ones(n, np.float32)",
           "block's sums alone by the kernels: every row's weight taken as 1",
           ("tests/test_real_rows.py",)),
    Mutant("spectheory/verifiers/block.py",
           "        total = compiled_totals(w, p, q)  # the same sums, no rows written",
           "        total = compiled_totals(None, p, q)  # the same sums, no rows written",
           "block's stop probabilities alone: token's residual summed", 
           ("tests/test_real_rows.py",)),
    # ------------------------------------------------- instances built in Python, checked
    Mutant("spectheory/inputs/instances.py",
           "        ok = (table.min(axis=-1) >= 0) & np.isfinite(table.max(axis=-1))",
           "        ok = np.isfinite(table.max(axis=-1))",
           "instance check: a negative float entry in a row that sums to 1 passes", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "            ok &= np.abs(total - 1) <= PYTHON_ROW_TOL",
           "            ok &= np.abs(total - 1) <= 1",
           "instance check: float rows off 1 by up to 1 pass", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "        total = sum(row, Fraction(0))\n        if total != 1:",
           "        total = sum(row, Fraction(0))\n        if total > 1:",
           "instance check: exact rows summing below 1 pass", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "    if model.vocab_size != V:",
           "    if False:",
           "instance check: a model of another vocabulary than the instance's passes to the shape "
           "check (which names the wrong cause)", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "    if getattr(instance, \"_checked\", False):\n        return instance",
           "    if getattr(instance, \"_checked\", True):\n        return instance",
           "instance check: every instance taken as checked", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "    if len(kinds) > 1:",
           "    if len(kinds) > 2:",
           "instance check: exact and float tables mixed in one instance pass", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "    if getattr(source, \"_checked\", False):\n        _trusted(made)",
           "    if True:\n        _trusted(made)",
           "instance check: a conversion (to_float, to_exact) of an unchecked instance taken as "
           "checked", INSTANCE),
    Mutant("spectheory/inputs/instances.py",
           "    return _trusted(Instance(V, L, target, draft))\n\n\ndef _no_duplicates",
           "    return Instance(V, L, target, draft)\n\n\ndef _no_duplicates",
           "instance check: an instance read from a file read again at every entry", INSTANCE),
    Mutant("lp/_guards.py",
           "    inputs_check_instance(instance, what)",
           "    pass",
           "LP entry: an instance built in Python not checked (an LP optimum of 3.0 from a target "
           "row summing to 3)", INSTANCE),
    Mutant("toy_models/divergence.py",
           "            out[d] = float(np.where(mass > 0, mass * div, 0.0).sum())",
           "            out[d] = float((mass * div).sum())",
           "mean KL along draft paths: a row the draft never reaches weighs 0 x inf = nan",
           INSTANCE),
    # ------------------------------------------------------- a later probe's bad inputs
    Mutant("spectheory/runtime/errors.py",
           "    except BaseException:  # noqa: BLE001 - a user exception's __str__ may raise anything",
           "    except ZeroDivisionError:  # noqa: BLE001 - a user exception's __str__ may raise anything",
           "user exception text: one that cannot be printed reaches the user as a traceback "
           "(the guard around str() bypassed)", LATE),
    Mutant("spectheory/runtime/errors.py",
           "    _guard_process_exit()  # a module that calls os._exit while it is imported",
           "    pass  # a module that calls os._exit while it is imported",
           "import of user code: os._exit(0) at import ends the run with exit 0 and no output",
           LATE),
    Mutant("spectheory/sweep/config.py",
           "        if key not in seen:\n            seen[key] = v\n            continue",
           "        if True:\n            seen[key] = v\n            continue",
           "sweep axes: a value listed twice passes (one job computed twice)", LATE),
    Mutant("spectheory/sweep/config.py",
           "    except RecursionError:\n        raise OptionError(f\"sweep file {source}: arrays",
           "    except MemoryError:\n        raise OptionError(f\"sweep file {source}: arrays",
           "sweep file nested 100,000 deep: a RecursionError traceback", LATE),
    Mutant("spectheory/engine/lossless.py",
           "    if not (exact or rep.lossless) and float(tv) <= rounding_resolution(N):",
           "    if False:",
           "float verdict at tolerance 0: a lossless verifier called LOSSY for a rounding TV of "
           "1e-17", LATE),
    Mutant("spectheory/runtime/limits.py",
           "    while 10 ** (e + 1) <= n:\n        e += 1",
           "    while 10 ** (e + 1) < n:\n        e += 1",
           "size messages: the decimal exponent of a power of ten one short", LATE),
    Mutant("spectheory/inputs/stateful.py",
           "    if eos is not None and (not is_integer(eos) or not 0 <= eos < V):",
           "    if eos is not None and (not is_integer(eos) or not 0 <= eos):",
           "grammar: a stop token past the vocabulary accepted (every law then says no sequence "
           "is valid)", LATE),
    Mutant("spectheory/engine/sampling.py",
           "    check_memory(n * (8 * K * L + 9 * V), f\"sampling n = {n:,} draft outcomes\",",
           "    check_memory(0, f\"sampling n = {n:,} draft outcomes\",",
           "sample_drafts: 10^12 outcomes allocated before any size check", LATE),
    Mutant("spectheory/runtime/errors.py",
           "        if lo < 0 or hi >= V:",
           "        if lo < 0 or hi > V:",
           "verifier law inputs: a drafted token equal to V accepted (a row out of bounds, or "
           "another path's mass; bare laws too, one check since)", LATE + BARE_IDS),
    Mutant("spectheory/runtime/errors.py",
           "            ps[-2] != shape[-1] + 1 or ps[-1] != qs[-1]:",
           "            ps[-1] != qs[-1]:",
           "verifier law inputs: p with L rows instead of L + 1 accepted (bare laws too, one check "
           "since)", LATE + BARE_IDS),
    Mutant("spectheory/registry.py",
           "        check_law_inputs(drafts, q, p, paths=not self.single_path, name=self.name)\n",
           "",
           "verifier law inputs: the call in the verifier's own form not checked", LATE),
    Mutant("spectheory/sampling.py",
           "    ok = torch.isfinite(sums) & (rows.amin(dim=-1) >= 0) & ((sums - 1).abs() <= tol)",
           "    ok = torch.isfinite(sums) & (rows.amin(dim=-1) >= 0)",
           "sample_output: a row summing to 2 (or 0) sampled as if normalised", LATE),
    Mutant("spectheory/sampling.py",
           "    _check_rows(rows, corr.dtype, \"correction\")",
           "    pass",
           "sample_output: the chosen correction row not checked (a negative entry gives a token)",
           LATE),
    Mutant("spectheory/sampling.py",
           "              and bool(((uniforms >= 0) & (uniforms < 1)).all())):",
           "              and bool(((uniforms >= 0) & (uniforms <= 1)).all())):",
           "sample_output: a uniform of exactly 1 accepted (the CDF's last step, past the row)",
           LATE),
    Mutant("spectheory/testing/checks/tree.py",
           "        t, note = readable(t, f\"{who} returned {what}\")",
           "        t, note = t.cpu(), None",
           "tree sampler outputs on the meta device: torch's traceback instead of a note", LATE),
    Mutant("spectheory/inputs/stateful.py",
           "    own = type(grammar).__module__.startswith(\"spectheory.\")",
           "    own = True",
           "a grammar of the user's own class: what its allowed() raises passes bare", LATE),
    Mutant("spectheory/inputs/stateful.py",
           "    if not (isinstance(m, np.ndarray) and m.dtype == bool and m.shape == (n, V)):",
           "    if not (isinstance(m, np.ndarray) and m.dtype == bool):",
           "a grammar's mask of another width accepted (numpy's broadcast error later)", LATE),
    Mutant("spectheory/runtime/errors.py",
           "        with contextlib.redirect_stdout(_kept_stderr()):\n            out = fn(",
           "        with contextlib.redirect_stdout(sys.stderr):\n            out = fn(",
           "user code closing stdout closes the toolkit's stderr (its failure report lost)", LATE),
    Mutant("spectheory/cli/__init__.py",
           "    restore_term = _on_sigterm()\n",
           "    restore_term = lambda: None\n",
           "SIGTERM ends a command at once, leaving its temporary folders behind", LATE),
    Mutant("spectheory/cli/figures.py",
           "        tmp = partial_folder(f\".{out.name}.partial-\", base)",
           "        tmp = Path(__import__(\"tempfile\").mkdtemp(prefix=f\".{out.name}.partial-\", "
           "dir=base))",
           "figures: its partial folder not held, so SIGTERM leaves it behind", LATE),
    Mutant("spectheory/runtime/limits.py",
           "    if not isinstance(text, str) or not _FLOAT_TEXT.fullmatch(text):",
           "    if not isinstance(text, str):",
           "command-line numbers: other scripts' digits and underscores read by float()", LATE),
    Mutant("spectheory/runtime/limits.py",
           "    if value == 0 and re.search(r\"[1-9]\", text.lower().split(\"e\")[0]):",
           "    if False:",
           "command-line numbers: 1e-400 silently read as 0", LATE),
    Mutant("lp/frontier.py",
           "_BUDGET_TEXT = re.compile(r\"\\+?(?:(?:[0-9]+",
           "_BUDGET_TEXT = re.compile(r\"\\+?(?:(?:\\d+",
           "frontier budgets: other scripts' digits (\\d) read as a budget", LATE),
    Mutant("lp/multipath.py",
           "            or not 0 <= float(tol) <= 1e-2:",
           "            or not float(tol) <= 1e-2:",
           "multipath LP: a negative separation tolerance accepted (the cutting planes never stop)",
           LATE),
    Mutant("spectheory/testing/checks/battery.py",
           "    if not ci:  # the deepest target table holds V^(L+1) entries: bounded before it is drawn",
           "    if False:  # the deepest target table holds V^(L+1) entries: bounded before it is drawn",
           "kit's make_instance: V = 10^6, L = 20 sent to the allocator", LATE),
    Mutant("spectheory/testing/checks/tree.py",
           "    check_memory(int(rows) * n * (16 + 16 * V), f\"draft_trees:",
           "    check_memory(0, f\"draft_trees:",
           "draft_trees: 10^12 trees sent to the allocator", LATE),
    Mutant("spectheory/sweep/runner.py",
           "        if ea < 0 or abs(be - (ea + 1)) > 1e-9 * max(1.0, abs(be)):",
           "        if ea < 0:",
           "sweep cache: an ok row whose E[tau+1] was edited by hand (99 at L = 1) reported", CACHE),
    Mutant("spectheory/sweep/runner.py",
           "        if abs(mean - out[\"expected_accepted\"]) > 1e-6 * max(1.0, mean):",
           "        if False:",
           "sweep cache: E[tau] and E[tau+1] edited together, the mean of tau_pmf not compared",
           CACHE),
    Mutant("spectheory/sweep/runner.py",
           "        if not 0 <= out[\"tv_to_target\"] <= 1:",
           "        if not 0 <= out[\"tv_to_target\"]:",
           "sweep cache: a total variation of 1.5 reported", CACHE),
    Mutant("spectheory/runtime/errors.py",
           "    if not isinstance(value, (bool, np.bool_)):\n        raise OptionError(f\"{name} = ",
           "    if False:\n        raise OptionError(f\"{name} = ",
           "switches given in Python: a truthy string such as 'no' read as True", LATE),
    Mutant("lp/frontier.py",
           "    if kl is not None and solver not in (None, \"cvxpy\"):",
           "    if False:",
           "the KL frontier with solver 'highs': solved with cvxpy without a word", LATE),
    Mutant("spectheory/testing/checks/proposal_mode.py",
           "            if found is not None:  # the caller's rows, not the sampler's fault",
           "            if False:  # the caller's rows, not the sampler's fault",
           "check_proposal: rows given that are not distributions blamed on the draft sampler",
           LATE),
    Mutant("spectheory/inputs/hetero_pairs.py",
           "    check_size(V ** (depth + 1), \"random_rational_model\", exact=True,",
           "    check_size(1, \"random_rational_model\", exact=True,",
           "random_rational_model: 10^31 exact entries drawn (a hang) before any size check", LATE),
    Mutant("spectheory/inputs/instances.py",
           "        check_memory(PARSE_BYTES_PER_BYTE * n, f\"reading the {what} {name} ({n:,} bytes)\",",
           "        check_memory(n, f\"reading the {what} {name} ({n:,} bytes)\",",
           "instance files: the memory of parsing taken as the file's size (a 2 GiB file parsed "
           "until memory runs out)", LATE),
    Mutant("spectheory/cli/audit.py",
           "    if seconds > limits.NOTE_SECONDS:\n        limits.note(f\"audit: ",
           "    if False:\n        limits.note(f\"audit: ",
           "audit: a long audit (50 s at --block 100) starts without a word", LATE),
    Mutant("spectheory/cli/audit.py",
           "        return  # refused by the memory check, in one line: no note before it",
           "        pass  # refused by the memory check, in one line: no note before it",
           "audit: the estimate noted before the memory refusal (two lines)",
           ("tests/test_audit.py",)),
    Mutant("spectheory/cli/report.py",
           "        seed = (args.seed + k) % 2**63  # the seeds in turn, wrapping past the last one",
           "        seed = args.seed + k  # the seeds in turn, wrapping past the last one",
           "report: --seed 2^63-1 fails on the next seed, one the user did not type", LATE),
    Mutant("spectheory/cli/figures.py",
           "            if not (isinstance(payload, dict)\n",
           "            if False and not (isinstance(payload, dict)\n",
           "figures --only over a figures.json that is a list: a TypeError", LATE),
    Mutant("spectheory/inputs/models.py",
           "    except (TypeError, ValueError) as err:\n        raise InstanceError(f\"context_independent: ",
           "    except ZeroDivisionError as err:\n        raise InstanceError(f\"context_independent: ",
           "context_independent: rows of text end in numpy's ValueError", LATE),
    # GBV: one compiled call per path for its positions and its tail
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "    M = total * (1 + 2 * V * eps)\n    return abs(np.float64(x))",
           "    M = total\n    return abs(np.float64(x))",
           "GBV kernels' route: the compiled screen bounds below(a) by the row's float sum "
           "without its rounding margin", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "                qg[0, e] = root_row[e]",
           "                qg[0, e] = root_row[V - 1 - e]",
           "GBV kernels' route: the root's q^G row copied into the path's rows reversed",
           KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        if i + 1 < L:\n            x[i + 1] = x_i * q_tok",
           "        if i + 1 < L:\n            x[i + 1] = q_tok",
           "GBV kernels' route: the path mass x_{i+1} without x_i", KERNELS),
    Mutant("spectheory/verifiers/_gbv_cpu.py",
           "        w[i + 1] = one if m > 1 else m",
           "        w[i + 1] = one if m >= 1 else m",
           "GBV kernels' route: a block weight of exactly 1 replaced by the constant 1",
           KERNELS, equivalent="where m = 1 both branches store the value 1 of the same dtype "
           "(and a NaN m still fails both comparisons)"),
    Mutant("figures/_common.py",
           '    folder = partial_folder(f"spectheory-fig-{name}-",',
           '    folder = (lambda prefix, parent: __import__("tempfile").mkdtemp(prefix=prefix, '
           'dir=parent))(f"spectheory-fig-{name}-",',
           "a figure grid's sweep folder not held for the SIGTERM handler: terminated, it is "
           "left in /dev/shm", LATE),
    # the kit's arguments: builders, instances=, integers as text, declared metadata
    Mutant("spectheory/testing/checks/battery.py",
           "    if not isinstance(kind, str) or kind not in KINDS:",
           "    if not isinstance(kind, str):",
           "make_instance takes a kind it does not know (draws Dirichlet rows for it)", ARGS),
    Mutant("spectheory/testing/checks/battery.py",
           '        L = check_integer(L, "make_instance: L", 1, MAX_BLOCK)',
           '        L = check_integer(L, "make_instance: L", 1, 10**18)',
           "make_instance: L unbounded before V^(L+1) is computed (L = 10^15 never returns)",
           ARGS),
    Mutant("spectheory/runtime/errors.py",
           "    if not isinstance(items, (str, bytes)):\n        try:",
           "    if True:\n        try:",
           "as_list: a text taken for a list of its characters", ARGS),
    Mutant("spectheory/runtime/errors.py",
           "    if lone and isinstance(items, lone):\n        return [items]",
           "    if lone and isinstance(items, lone):\n        return list(items)",
           "as_list: one instance alone iterated instead of made a list of one", ARGS),
    Mutant("spectheory/runtime/limits.py",
           '_SIGNED_INT = re.compile(r"[+-]?[0-9]{1,4000}")',
           '_SIGNED_INT = re.compile(r"[+-]*[0-9]{1,4000}")',
           "ascii_int: several signs accepted ('+-5' reaches int(): a traceback)", ARGS),
    Mutant("spectheory/runtime/limits.py",
           '_SIGNED_INT = re.compile(r"[+-]?[0-9]{1,4000}")',
           '_SIGNED_INT = re.compile(r"[+-]?\\d{1,4000}")',
           "ascii_int: any script's digits (\\d) where ASCII digits are meant", ARGS),
    Mutant("spectheory/registry.py",
           '        for flag in ("lossless", "order_invariant", "exact", "rule_skips_repeats",',
           '        for flag in ("order_invariant", "exact", "rule_skips_repeats",',
           "VerifierSpec: lossless='yes' kept as a truthy string", ARGS),
    Mutant("spectheory/testing/checks/seeds.py",
           "    if not isinstance(schedule, str) or schedule not in SCHEDULES:",
           "    if schedule is not None and schedule not in SCHEDULES:",
           "seed checks: schedule=None runs the mixed schedule in one check, a KeyError in the "
           "other", ARGS),
    Mutant("spectheory/engine/nodes.py",
           "    check_arrays(drafts, q, p, paths=False)\n    q, p = B.values(q, p)\n"
           "    if drafts.shape[0] == 0:\n        law = empty_law(p)",
           "    q, p = B.values(q, p)\n    if drafts.shape[0] == 0:\n        law = empty_law(p)",
           "a node-form law called directly with a non-array: an error from inside the law",
           ARGS),
    Mutant("spectheory/runtime/errors.py",
           '    if "int" not in str(drafts.dtype):',
           '    if "complex" in str(drafts.dtype):',
           "check_arrays: float drafts taken (rounded into token ids)", ARGS),
    Mutant("spectheory/verifiers/params.py",
           '_INT = re.compile(r"^[+-]?\\d+$", re.ASCII)',
           '_INT = re.compile(r"^[+-]?\\d+$")',
           "a rule's integer parameter in any script's digits (multiplicative(<Arabic one>) "
           "read as multiplicative(1))", ARGS),
    Mutant("spectheory/cli/__init__.py",
           '        self.register("type", int, _ascii_int)\n',
           '',
           "the command line's type=int options read by int() (other scripts' digits, 1_0)",
           ARGS),
    Mutant("spectheory/inputs/processing.py",
           '        if not text.isascii() or "_" in text:',
           '        if not text.isascii():',
           "a sampling parameter's text 1_0 read by float() as 10", ARGS),
    Mutant("spectheory/sweep/guard.py",
           "    _die_with(parent)\n    _one_thread()",
           "    _one_thread()",
           "a guarded job's child outlives its SIGKILLed parent (an orphan computing on)", LATE),
    Mutant("spectheory/testing/checks/step.py",
           "    return N * math.log2(max(V, 2)) > math.log2(limit) + 1 or V ** N > limit",
           "    return V ** N > limit",
           "the sequence laws make V^N before bounding N (tokens = 10^15 never returns)", ARGS),
    Mutant("spectheory/engine/drafttrees.py",
           "    return float(count)",
           "    return count",
           "a root of 70 i.i.d. children: C(69, r) past int64 reaches torch (OverflowError)",
           ROWS_CLI),
    Mutant("spectheory/testing/checks/calls.py",
           '        check_instance(inst, where=f"instances[{i}]")',
           "        pass",
           "the seeded and real-engine checks take rows that are no distribution (a PASS)",
           ROWS_CLI),
    Mutant("spectheory/testing/checks/tree.py",
           '    check_instance(instance, where=f"tree-mode instance {i}")',
           "    pass",
           "a tree check FAILs a correct sampler on a non-normalised instance", ROWS_CLI),
    Mutant("spectheory/inputs/instances.py",
           "        _normalise_rows(target)\n        _normalise_rows(draft)",
           "        pass",
           "float32 rows used as given: a lossless rule LOSSY by their rounding", ROWS_CLI),
    Mutant("spectheory/runtime/errors.py",
           "    (_exit_guard[0] if _exit_guard else os._exit)(code)",
           "    os._exit(code)",
           "SIGTERM while a sampler runs reported as the sampler calling os._exit(143)",
           ROWS_CLI),
    Mutant("spectheory/runtime/errors.py",
           "    with contextlib.redirect_stdout(_kept_stderr()):\n        try:\n"
           "            return importlib",
           "    with contextlib.nullcontext():\n        try:\n            return importlib",
           "a user module's import-time print lands on stdout and breaks --json", ROWS_CLI),
    Mutant("spectheory/verifiers/hetero.py",
           "            return _checked_block(call_user(scheme, inst, c, what=label), inst, c, "
           "label)",
           "            return scheme(inst, c)",
           "a user's block function unguarded: raw exceptions, exits and non-laws as verdicts",
           ROWS_CLI),
    Mutant("spectheory/inputs/tokenizers.py",
           '    check_models(inst.target, inst.target_tokenizer.size, inst.draft, '
           'inst.draft_tokenizer.size,\n                 where, "its tokenizer has")',
           "        pass",
           "a heterogeneous instance's models unchecked: verdicts on negative or NaN rows",
           ROWS_CLI),
    Mutant("spectheory/law.py",
           "    _real_dtype((stop, corr), name)\n    s = _as_numpy(stop)",
           "    s = _as_numpy(stop)",
           "a complex law from a user verifier reaches numpy's cast (raw RuntimeError)",
           ROWS_CLI),
    Mutant("spectheory/testing/checks/law_mode.py",
           "        _real_dtype(law_form(law, Bn, K, L, V, f\"verifier {spec.name}\"),  "
           "# its fault, not",
           "        (law,  # its fault, not",
           "a verifier law of the wrong form in a sampler check: raw IndexError or a wrong cause",
           ROWS_CLI),
    Mutant("toy_models/cli.py",
           '    if re.fullmatch(r"[+-]?[0-9]+", text.strip()):',
           "    if text.strip().isdigit():",
           "toy NAME=VALUE reads other scripts' digits as numbers", ROWS_CLI),
    Mutant("toy_models/checks.py",
           "    if not 1 <= L <= MAX_BLOCK:  # before any V^L is formed",
           "    if not 1 <= L:  # before any V^L is formed",
           "toy block_length = 30000 formats a 15,000-digit row count (traceback)", ROWS_CLI),
    Mutant("spectheory/inputs/processing.py",
           "    if isinstance(text, str) and not text.strip():",
           "    if False:",
           "--sampling '' taken as raw rows", ROWS_CLI),
    Mutant("lp/frontier.py",
           "    if not isinstance(drafting, str) or drafting not in DRAFTING:  # else read as norep",
           "    if False:",
           "frontier_lp(drafting='bogus') solved as norep", ROWS_CLI),
    Mutant("spectheory/runtime/errors.py",
           "            out.close()  # warns",
           "            pass  # warns",
           "an async sampler leaves Python's 'never awaited' warning on stderr", ROWS_CLI),
    Mutant("spectheory/testing/checks/proposal_mode.py",
           "                    pace.add(m)",
           "                    pass",
           "check_proposal(samples=10^12) runs for days without an estimate", ROWS_CLI),
    Mutant("spectheory/testing/checks/hf_generate.py",
           "            not 1 <= n_ast <= MAX_ASSISTANT_TOKENS:",
           "            not -5 <= n_ast <= MAX_ASSISTANT_TOKENS:",
           "num_assistant_tokens = -1 refused by transformers under another name",
           ("tests/test_hf_generate.py",)),
    Mutant("spectheory/testing/checks/calls.py",
           "            m = min(left, chunk, ramp)",
           "            m = min(left, chunk)",
           "a large run hands a slow sampler 1.6 million rows before its rate is known",
           ROWS_CLI),
    Mutant("lp/sparse.py",
           "                res = limits.interruptible(  # signals are handled while HiGHS solves",
           "                res = (lambda f, *a, **k: f(*a, **k))(",
           "HiGHS solves in the main thread: SIGTERM and Ctrl-C wait for the solve (minutes)",
           ROWS_CLI),
    Mutant("spectheory/runtime/errors.py",
           "    with contextlib.redirect_stdout(_kept_stderr()):\n        try:\n"
           "            return importlib",
           "    with contextlib.redirect_stdout(_KeptOpen(sys.stderr)):\n        try:\n"
           "            return importlib",
           "a thread a user module starts at import prints after stdout is put back: it writes "
           "through the freed stand-in (segmentation fault)", ROWS_CLI),
    Mutant("spectheory/engine/drafttrees.py",
           "    if count.bit_length() > 1000:  # past float64's range (about 1.8e308)",
           "    if count.bit_length() > 100000:  # past float64's range (about 1.8e308)",
           "2,000 i.i.d. children of one node: float(C(1999, r)) overflows (a traceback)",
           ROWS_CLI),
    Mutant("spectheory/verifiers/relaxed.py",
           '        if not ok or not math.isfinite(v) or v < 0:',
           '        if not ok or not math.isfinite(v):',
           "kl_divergence takes a negative probability (a number from no law)", ROWS_CLI),
    Mutant("spectheory/testing/checks/step.py",
           "                idx = idx * V + t[:, i:i + m + 1 - D]",
           "                idx = idx + t[:, i:i + m + 1 - D] * V ** i",
           "the kit's model reads the D tokens before a position in reverse order (the row of "
           "another prefix)", ROWS_CLI),
    Mutant("spectheory/verifiers/specinfer.py",
           "    check_arrays(drafts, q, p, paths=True)\n    q, p = B.values(q, p)\n"
           "    if drafts.shape[0] == 0:\n        return empty_law(p)\n    Bsz, K, L = drafts.shape",
           "    q, p = B.values(q, p)\n    if drafts.shape[0] == 0:\n        return empty_law(p)\n"
           "    Bsz, K, L = drafts.shape",
           "the node-by-node multi-path laws (hu, khisti, global-resolution, specinfer, spectr, "
           "spechub) read out-of-range ids unchecked", BARE_IDS),
    Mutant("spectheory/verifiers/multipath_baselines.py",
           "    check_arrays(drafts, q, p, paths=True)\n",
           "",
           "block-first and token-first check the first path's ids only (the first path's "
           "single-path law)", BARE_IDS),
    Mutant("spectheory/cli/__init__.py",
           "                         *kept_clauses()]), file",
           "                         ]), file",
           "a sweep stopped by SIGTERM says only that nothing half-written was left, not that its "
           "finished jobs' cache stays and resumes", ("tests/test_sweep.py",)),
    Mutant("spectheory/runtime/partial.py",
           "        _KEPT.pop(Path(path), None)",
           "        pass",
           "a finished sweep's cache is still named by a later SIGTERM in the same process",
           ("tests/test_sweep.py",)),
    Mutant("spectheory/testing/checks/tree.py",
           "    return chunk if total <= chunk else min(chunk, RAMP_FIRST_ROWS)",
           "    return chunk",
           "a large tree run's first call is a full chunk: a slow sampler runs minutes before its "
           "rate is known", ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/testing/checks/tree.py",
           "            if pace is not None:\n                pace.add(m)\n        at = 0",
           "        at = 0",
           "the tree law mode never projects its run time: 10^9 samples run for days",
           ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/testing/checks/tree.py",
           "            if pace is not None:\n                pace.add(m)\n        probs = targets",
           "        probs = targets",
           "the tree lossless mode never projects its run time", ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/runtime/errors.py",
           "            qs[:-1] != tuple(shape) or ps[:-2] != tuple(shape[:-1]) or \\",
           "            qs[:-1] != tuple(shape) or \\",
           "p of another batch or path count than the drafts is taken (a law broadcast over the "
           "batch)", BARE_IDS + LATE),
    Mutant("spectheory/runtime/errors.py",
           "    check_law_shapes(tuple(drafts.shape), q_shape, tuple(p.shape), paths, where)\n",
           "",
           "a bare law takes rows over another vocabulary, a batch of one against two, or the "
           "other path form (a law of mixed rows, or a raw error)", BARE_IDS),
    Mutant("spectheory/verifiers/cascades.py",
           "        check_arrays(drafts, q, p, paths=False)  # before the targets read the rows\n",
           "",
           "the cascade OPT rule reads rows of mismatched shapes before any check (a raw error)",
           BARE_IDS),
    Mutant("spectheory/cli/__init__.py",
           'with json_stdout(bool(getattr(args, "json", False) and getattr(args, "json_result", '
           'False)),',
           'with json_stdout(False,',
           "under --json a user thread's prints and os.write(1, ...) reach standard output around "
           "the JSON object", ROWS_CLI),
    Mutant("spectheory/cli/commands.py",
           "        result_stream().write(json.dumps(obj) + \"\\n\")",
           "        sys.stdout.write(json.dumps(obj) + \"\\n\")",
           "a command's JSON result goes to the descriptor the user code's output was moved to "
           "(standard error)", ROWS_CLI),
    Mutant("spectheory/verifiers/token.py",
           "        out[rows] = p[rows]",
           "        out[rows] = p[rows.flip(0)]",
           "many rows of total zero at once (the exact engine's batches) are filled from the target "
           "rows of other drafts", ("tests/test_numpy_float.py",)),
    Mutant("spectheory/sampling.py",
           "    return [tuple(row[: int(k)]) + (int(c),) for row, k, c in zip(d, t, last)]",
           "    return [tuple(row[: int(k) + 1]) + (int(c),) for row, k, c in zip(d, t, last)]",
           "an emitted block keeps the first rejected draft token before Y",
           ("tests/test_core_sampling.py",)),
    Mutant("spectheory/engine/nodes.py",
           "    if drafts.shape[0] == 0:\n        law = empty_law(p)\n"
           "        return law if corrections else Law(law.stop, None)\n",
           "",
           "a node-form law of an empty batch: torch.cat of no parts (a raw ValueError)",
           BARE_IDS),
    Mutant("spectheory/verifiers/specinfer.py",
           "    if drafts.shape[0] == 0:\n        return empty_law(p)\n",
           "",
           "the node-by-node multi-path laws of an empty batch: a broadcast error", BARE_IDS),
    Mutant("spectheory/runtime/errors.py",
           '            real = kind in ("f", "O")',
           '            real = kind in ("f", "O", "i")',
           "integer rows are taken as probabilities (a law of 0/1 weights)", BARE_IDS),
    Mutant("spectheory/cli/__init__.py",
           "    if sys.stdout is None:  # started with standard output closed",
           "    if False:  # started with standard output closed",
           "a command started with standard output closed: an AttributeError traceback",
           STREAMS),
    Mutant("spectheory/cli/__init__.py",
           "    if sys.stderr is None:  # started with standard error closed",
           "    if False:  # started with standard error closed",
           "a valid run started with standard error closed: an AttributeError traceback",
           STREAMS),
    Mutant("spectheory/inputs/instances.py",
           "            if sys.stdin is None:  # the command was started with standard input closed",
           "            if False:  # the command was started with standard input closed",
           "an instance read from a closed standard input: an AttributeError traceback", STREAMS),
    Mutant("spectheory/cli/__init__.py",
           '    if not text.startswith("Exceeds the limit ("):',
           "    if True:",
           "an exact result past Python's 4,300-digit limit on integer text: a ValueError "
           "traceback", STREAMS),
    Mutant("spectheory/inputs/instances.py",
           "    if depth > 64 or rows_total > MAX_JSON_PREFIXES:",
           "    if depth > 64:",
           "toy markov and ngram list a depth-1 table at every depth before the read-back "
           "refuses it (minutes, gigabytes)", STREAMS),
    Mutant("lp/claims/__init__.py",
           "        result_stream().write(json.dumps([r.to_json() for r in rows]) + \"\\n\")",
           "        sys.stdout.write(json.dumps([r.to_json() for r in rows]) + \"\\n\")",
           "claims --json writes its JSON to the descriptor held for results, which is then "
           "standard error", STREAMS),
    Mutant("spectheory/runtime/errors.py",
           "    if shape[-1] < 1:  # a block of no drafts",
           "    if False:  # a block of no drafts",
           "a law of L = 0 drafted tokens: an empty stop table, or an IndexError", BARE_IDS),
    Mutant("spectheory/runtime/errors.py",
           '    if str(drafts.dtype) in ("torch.uint8", "torch.int8", "torch.int16"):',
           '    if str(drafts.dtype) in ("torch.int8", "torch.int16"):',
           "uint8 token ids reach torch's gather (a raw RuntimeError)", BARE_IDS),
    Mutant("spectheory/verifiers/coupling.py",
           "    if not math.isfinite(x):",
           "    if False:",
           "the optimal-transport rules read a NaN or infinite row entry as a Fraction (a raw "
           "ValueError)", BARE_IDS),
    Mutant("spectheory/testing/checks/tree.py",
           '    check_size(V ** (D + 1), f"the default instances of a tree of depth {D}", True, None,',
           '    check_size(V ** (D + 1), f"the default instances of a tree of depth {D}", False, None,',
           "a wide tree's default instances checked under the float limit: the exact tied "
           "instance is refused later, naming --max-sequences, which check-sampler lacks",
           ("tests/test_hostile_kit_2026.py",)),
    # input files bounded before their memory is taken
    Mutant("spectheory/inputs/instances.py",
           '                    if first != "{":',
           "                    if False:",
           "a stream that cannot be a JSON object (/dev/zero, yes |) read to the 2 GiB bound "
           "before it is refused", READS),
    Mutant("spectheory/inputs/instances.py",
           "                if st.st_size > max_bytes:",
           "                if st.st_size > 2 * max_bytes:",
           "a regular file over the size bound read (and its parse sized) before it is refused",
           READS),
    Mutant("spectheory/inputs/instances.py",
           "                memory(st.st_size)\n",
           "",
           "a regular file whose parse cannot fit is read before the memory bound refuses it",
           READS),
    Mutant("spectheory/inputs/instances.py",
           "                memory(n)\n",
           "",
           "a stream's memory bound not checked as it is read: refused only at the size bound",
           READS),
    Mutant("spectheory/inputs/instances.py",
           "                if n > max_bytes:",
           "                if n > 2 * max_bytes:",
           "a stream read past the size bound", READS),
    Mutant("spectheory/inputs/instances.py",
           '                    texts.append(decoder.decode(b"", final=True))',
           "                    pass",
           "a file that ends inside a multi-byte character is read as if the character were "
           "not there", READS),
    Mutant("spectheory/runtime/limits.py",
           "    if s < 0.1:\n        return f\"{s:.2g} s\"",
           "    if s < 0:\n        return f\"{s:.2g} s\"",
           "a time under 0.05 s written \"0.0 s\" (a refusal said a run would take at least 0.0 s, "
           "over max_seconds = 0.001 (0.0 s))", ("tests/test_sampler_budget.py",)),
    Mutant("spectheory/cli/commands.py",
           "    if args.exact:\n        raise OptionError(f\"--tol {args.tol:g} applies to float mode",
           "    if False:\n        raise OptionError(f\"--tol {args.tol:g} applies to float mode",
           "--tol under --exact silently dropped (exact rows must sum to exactly 1)", LATE),
    Mutant("spectheory/sweep/config.py",
           "                if isinstance(v, float) and not math.isfinite(v):",
           "                if False:",
           "a toy family's NaN or infinite knob read: every job of the grid fails as a row (exit 1) "
           "instead of the file being refused", ("tests/test_sweep_grids.py",)),
    # adaptive analysis memory, tree check bounds, sharp designs' replica laws
    Mutant("spectheory/engine/adaptive.py",
           "ADAPTIVE_BYTES_PER_LEAF = {False: 640, True: 1_200}",
           "ADAPTIVE_BYTES_PER_LEAF = {False: 48, True: 1_200}",
           "the adaptive analysis sized at the exact engine's 48 B a leaf: V = 4, L = 12 accepted "
           "and run out of memory", ("tests/test_adaptive.py",)),
    Mutant("spectheory/runtime/sizes.py",
           "    if bytes_per_leaf is not None:\n        limits.check_memory(",
           "    if False:\n        limits.check_memory(",
           "an enumeration's own bytes per leaf stated but not checked against the machine",
           ("tests/test_adaptive.py",)),
    Mutant("spectheory/testing/checks/tree.py",
           "    if draft_rows > MAX_DRAFT_ROWS:",
           "    if False:",
           "draft_rows = 10^7 drafted and its exact laws computed for minutes before any check",
           ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/testing/checks/tree.py",
           "        if samples != \"auto\" and samples < trees:  # before any tree is drafted",
           "        if False:  # before any tree is drafted",
           "fewer samples than drafted trees refused only after every tree was drafted",
           ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/testing/designs/sharp.py",
           "    d = d.clone()\n    q, p = q.to(torch.float64, copy=True), p.to(torch.float64, copy=True)",
           "    q, p = q.to(torch.float64), p.to(torch.float64)",
           "a replica law that writes into its rows changes the caller's pool and later designs",
           ("tests/test_hostile_designs_args.py",)),
    Mutant("spectheory/testing/designs/sharp.py",
           "        _cell_groups(what, [cells])",
           "        pass",
           "predicted_power and simulated_power report powers of a replica law that is not a law "
           "(a total variation of 2, negative cells clipped)", ("tests/test_hostile_designs_args.py",)),
    Mutant("spectheory/testing/designs/sharp.py",
           "        if d.shape[0] == 0:",
           "        if False:",
           "a pool group of no rows reaches a reshape (a raw RuntimeError)",
           ("tests/test_hostile_designs_args.py",)),
    # sampling parameters that would do nothing, or give a wrong verdict
    Mutant("spectheory/inputs/stateful.py",
           "    factors = [(t, v if isinstance(v, Fraction) else Fraction(repr(float(v))))",
           "    factors = [(t, v)",
           "logit_bias=0:*2 under --exact multiplies exact rows by the float 2.0: a correct "
           "verifier reported NOT A LAW", ("tests/test_stateful.py",)),
    Mutant("spectheory/inputs/processing.py",
           "        if stops and not mt:",
           "        if False:",
           "stop_token_ids without min_tokens dropped silently (the unprocessed law printed)",
           ("tests/test_stateful.py",)),
    Mutant("spectheory/inputs/processing.py",
           "    if not text:  # \"stop_token_ids=\" set nothing, silently",
           "    if False:  # \"stop_token_ids=\" set nothing, silently",
           "a sampling key with no value (stop_token_ids=) dropped silently",
           ("tests/test_stateful.py",)),
    Mutant("spectheory/sweep/config.py",
           "            if ids and max(ids) >= vocab:",
           "            if ids and max(ids) > vocab:",
           "a sweep's sampling token at the edge of every vocabulary read: every job fails as a row",
           ("tests/test_sweep_grids.py",)),
    Mutant("spectheory/inputs/stateful.py",
           "MAX_REGEX_ITEMS = 100_000",
           "MAX_REGEX_ITEMS = 10_000_000",
           "a regex grammar unrolled to 10^6 items (280 MB) compiled unchecked; a{1000000000} took "
           "24 GB", ("tests/test_stateful.py",)),
    Mutant("spectheory/inputs/stateful.py",
           "            total += max(int(lo), 1) * _regex_items(sub)",
           "            total += max(int(lo), 1) + _regex_items(sub)",
           "nested counted repeats added instead of multiplied: (a{1000}){1000} compiled",
           ("tests/test_stateful.py",)),
    Mutant("spectheory/engine/drafttrees.py",
           "    if not isinstance(shape, (list, tuple, np.ndarray)) and _is_undirected_graph(shape):",
           "    if False:",
           "an undirected networkx.Graph read as branching factors (its node labels)",
           ("tests/test_trees.py",)),
    Mutant("spectheory/engine/adaptive.py",
           "                           check_flag(self.reads_target, f\"stopping rule {self.name!r} \"",
           "                           (lambda v, n: v)(self.reads_target, f\"stopping rule {self.name!r} \"",
           "StoppingRule(reads_target=\"no\") read as true", ("tests/test_adaptive.py",)),
    Mutant("spectheory/testing/checks/seeds.py",
           "    if not is_integer(stream) or not 0 <= int(stream) < 1 << 20:",
           "    if not is_integer(stream):",
           "keyed_uniform's stream out of range: a raw OverflowError, or streams overlapping the "
           "next position's", ("tests/test_hostile_sampling_state.py",)),
    Mutant("spectheory/inputs/grammar_engines.py",
           "    if not isinstance(path, (str, bytes)) and not hasattr(path, \"__fspath__\"):",
           "    if False:",
           "load_grammar(5) reads file descriptor 5; load_grammar(None) a raw TypeError",
           ("tests/test_hostile_sampling_state.py",)),
    Mutant("spectheory/cli/commands.py",
           "    if args.lossless_tol and args.exact:",
           "    if False:",
           "--lossless-tol under --exact ignored (the check called only TV = 0 lossless)", LATE),
    Mutant("spectheory/cli/commands.py",
           "                            (\"--drafting\", getattr(args, \"drafting\", None)))",
           "                            )",
           "exact --stop with --drafting: the drafting scheme ignored", LATE),
    Mutant("lp/claims/__init__.py",
           "    if args.markdown and args.json:",
           "    if False:",
           "claims --json --markdown printed markdown", LATE),
    Mutant("spectheory/sweep/cli.py",
           "    _refuse_given(args, PLOT_OPTIONS, \"'sweep plot OUT', not to a run\")",
           "    pass",
           "a sweep run's --figure and --x accepted and ignored", LATE),
    Mutant("spectheory/engine/drafttrees.py",
           "    for count, what, formula in sorted(checks, key=lambda c: c[0] <= limit):",
           "    for count, what, formula in checks:",
           "a tree's first size noted on stderr before its route's size refused (two lines)",
           ("tests/test_hostile_cli_trees.py",)),
    Mutant("spectheory/engine/drafttrees.py",
           "            if (d + widths[-1]) * log_v + math.log2(len(widths)) > WORK_CAP_BITS:",
           "            if False:",
           "the node route's work of a deep iid tree counted exactly: V^w summed over 59,049 "
           "widths (seconds) where any count past 2^256 is refused anyway",
           ("tests/test_hostile_cli_trees.py",)),
    Mutant("spectheory/inputs/grammar_engines.py",
           "                    if accepting:\n                        row[t] = END",
           "                    if True:\n                        row[t] = END",
           "llguidance's stop token kept where no text can complete: a grammar that accepts "
           "nothing gave a number", ("tests/test_grammar_engines.py",)),
    Mutant("spectheory/inputs/grammar_engines.py",
           "    where = f\"{name}: \" if name else \"\"",
           "    where = \"\"",
           "an llguidance grammar file's refusals do not name the file",
           ("tests/test_grammar_engines.py",)),
    Mutant("spectheory/testing/checks/vectors.py",
           "    missing = [key for key in FIELDS if key not in data]  # every file has every field",
           "    missing = [key for key in (\"verifier\", \"paths\", \"drafting\", \"instance\", \"name\") if key not in data]",
           "a vector file without output_law judged a MISMATCH (exit 1) instead of refused",
           ("tests/test_vectors.py",)),
    Mutant("spectheory/testing/checks/vectors.py",
           "        raise named from None",
           "        raise",
           "a vector file's unknown verifier or bad instance refused without naming the file",
           ("tests/test_vectors.py",)),
    Mutant("spectheory/runtime/limits.py",
           "    if _state.deadline is not None:\n        call = [label, time.monotonic(), False]",
           "    if False:\n        call = [label, time.monotonic(), False]",
           "a time limit that stops a hanging user function does not name it",
           ("tests/test_hostile_kit_2026.py",)),
    Mutant("spectheory/testing/checks/hf_generate.py",
           "    if not isinstance(schedule, str) or schedule not in ASSISTANT_SCHEDULES:",
           "    if not isinstance(schedule, str):",
           "a schedule transformers does not have taken, and a verdict given on it",
           ("tests/test_hf_generate.py",)),
    Mutant("spectheory/testing/checks/hf_generate.py",
           "            or not 0 <= float(threshold) < 1:",
           "            or float(threshold) < 0:",
           "a NaN or 1 confidence threshold taken", ("tests/test_hf_generate.py",)),
    Mutant("spectheory/testing/checks/hf_generate.py",
           "        if mnt and eos is None:  # it masks the stop token: with none, it would do nothing",
           "        if False:  # it masks the stop token: with none, it would do nothing",
           "min_new_tokens without eos_token_id taken (it does nothing)",
           ("tests/test_hf_generate.py",)),
    Mutant("spectheory/testing/checks/tree_ports.py",
           "    _check_layout_options(layout, options)\n",
           "",
           "a tree layout's unknown option or unusable device found only at the first call, and "
           "blamed on the engine function", ("tests/test_tree_sampler.py",)),
    Mutant("spectheory/cli/__init__.py",
           "        self.register(\"action\", None, _StoreOnce)\n",
           "",
           "an option given twice: the second value replaced the first silently", LATE),
    Mutant("spectheory/testing/checks/mlx_generate.py",
           "        rp = _number(\"repetition_penalty\", rp, 1e-6, 1e6)",
           "        rp = _number(\"repetition_penalty\", rp, 0, 1e6, lo_open=True)",
           "a penalty that overflows MLX's float32 logits reported as the model handing a token "
           "outside the vocabulary", ("tests/test_mlx_generate.py",)),
    Mutant("spectheory/testing/checks/mlx_generate.py",
           "        if top_k > vocab_size:",
           "        if top_k > 2**63:",
           "a top_k past the vocabulary reaches MLX (std::bad_cast, or its own refusal)",
           ("tests/test_mlx_generate.py",)),
    Mutant("spectheory/testing/checks/mlx_generate.py",
           "    skw = {k: _plain(kw[k]) for k in SAMPLER_KEYS if kw.get(k) is not None}",
           "    skw = {k: kw[k] for k in SAMPLER_KEYS if kw.get(k) is not None}",
           "numpy scalars handed to MLX's compiled sampler, which refuses them",
           ("tests/test_mlx_generate.py",)),
    Mutant("spectheory/inputs/processing.py",
           "            if long:  # int() of over 4,300 digits raised Python's own ValueError, unnamed",
           "            if False:  # int() of over 4,300 digits raised Python's own ValueError, unnamed",
           "a 5,000-digit sampling number reaches int(): argparse's generic 'invalid value' line",
           LATE),
    Mutant("spectheory/inputs/processing.py",
           "    if isinstance(key, str) and key not in KEYS and key.strip().lower() in KEYS:",
           "    if False:",
           "an upper-case sampling key matched to the nearest key by spelling ('top_p')", LATE),
    Mutant("spectheory/cli/audit.py",
           "    return max(ratios, key=ratios.get)",
           "    return \"batch (--batch)\"",
           "every audit too large advised a smaller batch", LATE),
    Mutant("spectheory/testing/checks/vectors.py",
           "    if drafting is not None and names and all(_single_path(v) for v in names):",
           "    if False:",
           "vectors export --drafting for single-path verifiers only: ignored, the default files "
           "written", ("tests/test_vectors.py",)),
    Mutant("spectheory/testing/vectors_cli.py",
           "        if text not in notes:",
           "        if True:",
           "vectors export notes a verifier's drafting scheme once per law computed (three lines "
           "for one verifier)", ("tests/test_vectors.py",)),
    Mutant("spectheory/testing/checks/proposal_mode.py",
           "    ramp = RAMP_FIRST_ROWS if any(n > c for n, c in zip(per, chunks)) else None",
           "    ramp = None",
           "check_proposal hands a slow drafter its whole first chunk (11 million rows) before "
           "the pace knows its rate", ("tests/test_hostile_rows_cli_2026.py",)),
    Mutant("spectheory/testing/checks/proposal_mode.py",
           "    ramp = RAMP_FIRST_ROWS if any(n > c for n, c in zip(per, chunks)) else None",
           "    ramp = RAMP_FIRST_ROWS",
           "check_proposal splits runs of one call a row into ramped calls (other draws for the "
           "same seed)", ("tests/test_hostile_rows_cli_2026.py",)),
]


# ----------------------------------------------------------------------------- copy


def _repo_files(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                         capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f]


def _package_dirs(root: Path) -> dict:
    import tomllib

    data = tomllib.loads((root / "pyproject.toml").read_text())
    return data.get("tool", {}).get("setuptools", {}).get("package-dir", {})


def make_copy(root: Path, dest: Path) -> dict:
    """Copy the repository's files into ``dest`` and link its mapped packages; returns the
    package -> folder mapping."""
    for rel in _repo_files(root):
        src = root / rel
        if not src.is_file() or src.is_symlink():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    mapping = _package_dirs(root)
    for pkg, folder in mapping.items():
        link = dest.joinpath(*pkg.split("."))
        if not link.exists():
            os.symlink(os.path.relpath(dest / folder, link.parent), link)
    return mapping


def check_imports(dest: Path, mapping: dict, python: str) -> None:
    """Abort unless spectheory and every mapped package import from the copy."""
    mods = ["spectheory"] + list(mapping)
    code = ("import importlib, os\n"
            f"for m in {mods!r}:\n"
            "    print(m, os.path.realpath(importlib.import_module(m).__file__))\n")
    out = subprocess.run([python, "-c", code], cwd=dest, env=_env(dest), capture_output=True,
                         text=True, timeout=300)
    if out.returncode:
        sys.exit(f"mutation: importing from the copy failed:\n{out.stderr}")
    real = os.path.realpath(dest)
    for line in out.stdout.splitlines():
        mod, path = line.split(" ", 1)
        if not path.startswith(real + os.sep):
            sys.exit(f"mutation: {mod} imports from {path}, not from the copy {real}")
        print(f"  {mod}: {os.path.relpath(path, real)}")


def _env(dest: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(dest)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


# ----------------------------------------------------------------------------- run


def run_tests(dest: Path, tests, python: str, timeout: float):
    """(status, first failing test, seconds) of one pytest run in the copy."""
    cmd = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=dest, env=_env(dest), capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", "", time.perf_counter() - t0
    secs = time.perf_counter() - t0
    first = ""
    for line in out.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            first = line.split(" ", 1)[1].split(" - ")[0]
            break
    if out.returncode == 0:
        return "survived", "", secs
    if out.returncode in (1, 2):  # test failures, or errors during collection
        return "killed", first or out.stdout.strip().splitlines()[-1:][0], secs
    return f"error (pytest exit {out.returncode})", out.stdout[-300:], secs


def apply(dest: Path, m: Mutant):
    """Apply mutant ``m`` in the copy; returns the original text (None when stale)."""
    path = dest / m.file
    if not path.is_file():
        return None
    text = path.read_text()
    if text.count(m.original) != 1:
        return None
    path.write_text(text.replace(m.original, m.replacement, 1))
    return text


def _selection(spec: str | None) -> list[int]:
    if not spec:
        return list(range(1, len(MUTANTS) + 1))
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    bad = [i for i in out if not 1 <= i <= len(MUTANTS)]
    if bad:
        sys.exit(f"mutation: no mutant {bad[0]} (1..{len(MUTANTS)})")
    return out


def _short(s: str) -> str:
    return " ".join(s.split())


def markdown(results) -> str:
    lines = ["| # | file | change | defect | result | caught by |", "|---|---|---|---|---|---|"]
    for r in results:
        m = MUTANTS[r["id"] - 1]
        change = f"`{_short(m.original)}` → `{_short(m.replacement)}`".replace("|", "\\|")
        result = r["status"] + (" (equivalent)" if m.equivalent else "")
        caught = f"`{r['first']}`" if r["status"] == "killed" and r["first"] else ""
        lines.append(f"| {r['id']} | `{m.file}` | {change} | {m.rationale} | {result} | "
                     f"{caught.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--only", help="mutant numbers to run, e.g. 3,7-9 (default: all)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per pytest run")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the test deps")
    ap.add_argument("--markdown", help="write the results table (Markdown) to this file")
    ap.add_argument("--json", help="write the results (JSON) to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = ap.parse_args(argv)

    ids = _selection(args.only)
    if args.list:
        for i in ids:
            m = MUTANTS[i - 1]
            eq = " [equivalent]" if m.equivalent else ""
            path = ROOT / m.file
            if not path.is_file() or path.read_text().count(m.original) != 1:
                eq += " [STALE: the fragment is not in the file exactly once]"
            print(f"{i:3d}. {m.file}: {m.rationale}{eq}\n     - {_short(m.original)}\n"
                  f"     + {_short(m.replacement)}\n     tests: {' '.join(m.tests)}")
        return 0

    dest = Path(tempfile.mkdtemp(prefix="spectheory-mutation-"))
    started = _dt.datetime.now(_dt.timezone.utc)
    results = []
    try:
        print(f"copy: {dest}")
        mapping = make_copy(ROOT, dest)
        check_imports(dest, mapping, args.python)
        passing = {}  # test file -> passes unmutated
        for i in ids:
            for test in MUTANTS[i - 1].tests:
                if test not in passing:
                    status, first, secs = run_tests(dest, (test,), args.python, args.timeout)
                    passing[test] = status == "survived"
                    print(f"baseline {test}: "
                          f"{'passes' if passing[test] else status + ' ' + first} ({secs:.0f} s)",
                          flush=True)
        for i in ids:
            m = MUTANTS[i - 1]
            if not all(passing[t] for t in m.tests):
                r = {"id": i, "status": "baseline fails", "first": "", "seconds": 0.0}
            else:
                original = apply(dest, m)
                if original is None:
                    r = {"id": i, "status": "stale", "first": "", "seconds": 0.0}
                else:
                    try:
                        status, first, secs = run_tests(dest, m.tests, args.python, args.timeout)
                    finally:
                        (dest / m.file).write_text(original)
                    r = {"id": i, "status": status, "first": first, "seconds": round(secs, 1)}
            results.append(r)
            eq = " (equivalent)" if m.equivalent else ""
            print(f"{i:3d}. {r['status']:<9}{eq} {m.file}: {m.rationale}"
                  + (f"  [{r['first']}]" if r["first"] else "") + f" ({r['seconds']:.0f} s)",
                  flush=True)
    finally:
        if args.keep:
            print(f"kept: {dest}")
        else:
            shutil.rmtree(dest, ignore_errors=True)

    behavioural = [r for r in results if not MUTANTS[r["id"] - 1].equivalent
                   and r["status"] in ("killed", "survived", "timeout")]
    killed = sum(r["status"] in ("killed", "timeout") for r in behavioural)
    other = [r for r in results if r["status"] not in ("killed", "survived", "timeout")]
    rate = f"{killed}/{len(behavioural)}" + (
        f" = {100 * killed / len(behavioural):.1f}%" if behavioural else "")
    print(f"\nkilled {rate} of the behavioural mutants"
          + (f"; {len(other)} not run (stale or baseline failing)" if other else ""))
    survivors = [r["id"] for r in behavioural if r["status"] == "survived"]
    if survivors:
        print(f"survived: {', '.join(map(str, survivors))}")
    meta = {"date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python scripts/mutation.py" + (f" --only {args.only}" if args.only else ""),
            "killed": killed, "behavioural": len(behavioural), "results": results}
    if args.markdown:
        Path(args.markdown).write_text(markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(meta, indent=1) + "\n")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
