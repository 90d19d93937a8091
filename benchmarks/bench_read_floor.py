"""Laws at the read floor: the exact engine's per-node route against a plain numpy reference.

For token verification (forward scan) and block verification (backward scan) this script
computes, in plain numpy, level by level and without anything from `spectheory` but the input
tables, what [`analyze`][spectheory.analyze] computes on the per-node route
(`spectheory.engine.nodes.node_block_law`, `spectheory.engine.output.node_output_law`): the pmf of tau, the
output law over V^(L+1) sequences and its total variation to the target law. The reference is
written from the formulas of the module docstring of `spectheory/engine/nodes.py`:

* Q_0 = 1, Q_{d+1}(x^d a) = Q_d(x^d) q(a|x^d), the draft mass of every node;
* token (forward scan): c_0 = 1, c_{d+1}(x^d a) = min(1, p(a|x^d) / q(a|x^d)) (ratio 1 where
  q(a|x^d) = 0), R_d = prod_{j<=d} c_j, m_d = Q_d R_d (1 - sum_a q(a|x^d) c_{d+1}(x^d a)),
  m_L = Q_L R_L; correction_d = normalise(max(p - q, 0)) (p where the residual is zero);
* block (backward scan, Sun et al., arXiv 2403.10444): w_0 = 1, w_{d+1}(x^d a) = min(1, w_d(x^d)
  p(a|x^d) / q(a|x^d)), S_d = sum_y max(w_d p(y|x^d) - q(y|x^d), 0), h_0 = 1,
  h_d = S_d / (S_d + (1 - w_d)) (1 where the denominator is 0), h_L = w_L; G_L = 1,
  G_d = sum_a q(a|x^d) (1 - h_{d+1}(x^d a)) G_{d+1}(x^d a), m_d = Q_d h_d G_d;
  correction_d = normalise(max(w_d p - q, 0));
* both: correction_L = p(.|x^L); P(tau = d) = sum m_d; the output law A_1 = m_0 correction_0,
  A_{j+1} = A_j p + m_j correction_j, so A_{L+1} = (A_L + m_L) p(.|x^L); the target law
  T_{j+1} = T_j p; since every row p(.|x^L) sums to 1,
  TV = 1/2 sum_{x^L} |A_L + m_L - T_L| (read at depth L, V^L entries).

With ``laws`` the reference also writes the output law A_{L+1} (V^(L+1) entries); the target
law over V^(L+1) sequences is built by neither (`ExactAnalysis.target_law` is computed on first
access). Both sides are checked to agree to 1e-12 (tau pmf, TV, output law), then timed
interleaved (reference, engine, reference, ...), and the median of the repeats is reported with
the ratio engine / reference. torch and numpy run on one thread.

Usage:

```bash
PYTHONPATH=. python benchmarks/bench_read_floor.py --label after --repeats 21
```

writes (merging into an existing file, one entry per ``--label``)
``benchmarks/results/read_floor.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import numpy as np
import torch

import spectheory

from _machine import cpu_name

TOL = 1e-12


# ----------------------------------------------------------------------------- reference


def _ratio(px, qx):
    """p / q entrywise, 1 where q = 0 (a new array)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.divide(px, qx)
    zero = qx == 0
    if zero.any():
        r[zero] = 1.0
    return r


def _rowsum(x):
    return np.einsum("ij->i", x)


def _scale_rows(x, s, out=None):
    """x [n, V] times s [n] row by row."""
    return np.multiply(x, s[:, None], out=out)


def _normalise(res, p):
    """res / (its row sum), in place; the row p where the sum is 0."""
    s = _rowsum(res)
    zero = s == 0
    if zero.any():
        s[zero] = 1.0
        res[zero] = p[zero]
    return _scale_rows(res, 1.0 / s, out=res)


def reference_token(p, q, V: int, L: int, laws: bool):
    """tau pmf [L+1], TV, output law [V^(L+1)] (or None) of token verification."""
    QR = np.ones(1)  # Q_d R_d
    stop, corr = [], []
    for d in range(L):
        qc = np.minimum(_ratio(p[d], q[d]), 1.0, out=None)  # c_{d+1} at the children, [V^d, V]
        qc *= q[d]  # q(a|x^d) c_{d+1}(x^d a)
        stop.append(QR * (1.0 - _rowsum(qc)))
        res = np.subtract(p[d], q[d])
        corr.append(_normalise(np.maximum(res, 0.0, out=res), p[d]))
        QR = _scale_rows(qc, QR).reshape(-1)
    stop.append(QR)
    return _output(stop, corr, p, V, L, laws)


def reference_block(p, q, V: int, L: int, laws: bool):
    """tau pmf [L+1], TV, output law [V^(L+1)] (or None) of block verification."""
    w, h, corr, Q = np.ones(1), [np.ones(1)], [], [np.ones(1)]
    for d in range(L):
        res = _scale_rows(p[d], w)
        res -= q[d]
        np.maximum(res, 0.0, out=res)
        if d > 0:
            S = _rowsum(res)
            den = S + (1.0 - w)
            zero = den == 0
            den[zero] = 1.0
            S[zero] = 1.0
            h.append(S / den)
        corr.append(_normalise(res, p[d]))
        ratio = _ratio(p[d], q[d])
        w = np.minimum(_scale_rows(ratio, w, out=ratio).reshape(-1), 1.0, out=ratio.reshape(-1))
        Q.append(_scale_rows(q[d], Q[d]).reshape(-1))
    h.append(w)  # h_L = w_L
    stop = [None] * (L + 1)
    stop[L] = Q[L] * h[L]
    G = 1.0 - h[L]  # (1 - h_L) G_L
    for d in range(L - 1, -1, -1):
        G = np.einsum("ij,ij->i", q[d], G.reshape(-1, V))  # G_d
        stop[d] = Q[d] * h[d] * G
        G *= 1.0 - h[d]
    return _output(stop, corr, p, V, L, laws)


def _output(stop, corr, p, V: int, L: int, laws: bool):
    A = np.zeros(1)
    T = np.ones(1)
    for j in range(L):
        Aj = _scale_rows(p[j], A)
        Aj += _scale_rows(corr[j], stop[j], out=corr[j])
        A = Aj.reshape(-1)
        T = _scale_rows(p[j], T).reshape(-1)
    top = A + stop[L]
    tv = 0.5 * np.abs(top - T).sum()
    out = _scale_rows(p[L], top).reshape(-1) if laws else None
    return np.array([m.sum() for m in stop]), tv, out


REFERENCE = {"token": reference_token, "block": reference_block}


# ----------------------------------------------------------------------------- timing


def _check(name, laws, ref, res) -> float:
    """Largest difference between the reference and the engine (raises above TOL)."""
    tau, tv, out = ref
    diffs = [np.abs(tau - np.asarray(res.tau_pmf)).max(), abs(tv - float(res.tv_to_target))]
    if laws:
        diffs.append(float(np.abs(out - res.output_law).max()))
    elif res.output_law is not None:
        raise SystemExit(f"{name}: laws=False returned an output law")
    worst = float(max(diffs))
    if not worst <= TOL:
        raise SystemExit(f"{name} laws={laws}: reference and engine differ by {worst:.3g}")
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--V", type=int, default=8)
    ap.add_argument("--L", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--label", default="current")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "read_floor.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    inst = spectheory.random_instance(a.V, a.L, a.seed)
    V, L = a.V, a.L
    p = [inst.target.level(d) for d in range(L + 1)]
    q = [inst.draft.level(d) for d in range(L)]
    rows = {}
    for name in ("token", "block"):
        for laws in (True, False):
            ref_fn = REFERENCE[name]
            worst = _check(name, laws, ref_fn(p, q, V, L, laws),
                           spectheory.analyze(inst, name, laws=laws))
            t_ref, t_eng = [], []
            for _ in range(a.repeats):
                t = time.perf_counter()
                ref_fn(p, q, V, L, laws)
                t_ref.append(time.perf_counter() - t)
                t = time.perf_counter()
                spectheory.analyze(inst, name, laws=laws)
                t_eng.append(time.perf_counter() - t)
            mr, me = float(np.median(t_ref)), float(np.median(t_eng))
            key = f"{name}, laws={laws}"
            rows[key] = {"reference_ms": mr * 1e3, "engine_ms": me * 1e3, "ratio": me / mr,
                         "max_difference": worst}
            print(f"{key:20s} reference {mr * 1e3:8.2f} ms  engine {me * 1e3:8.2f} ms  "
                  f"ratio {me / mr:5.2f}  (agree to {worst:.1e})")
    entry = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "PYTHONPATH=. python benchmarks/bench_read_floor.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "instance": f"spectheory.random_instance({V}, {L}, {a.seed}), float64",
        "threads": {"torch": torch.get_num_threads(), "numpy": "one (no BLAS call)"},
        "timing": f"median of {a.repeats}, reference and engine interleaved",
        "machine": {"uname_m": platform.machine(), "nproc": os.cpu_count(), "cpu": cpu_name(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "numpy": np.__version__},
        "results": rows,
    }
    data = {}
    if os.path.exists(a.out):
        with open(a.out) as f:
            data = json.load(f)
    data[a.label] = entry
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(data, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
