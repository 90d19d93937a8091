"""Check sgl-jax's tree samplers (SGLang's JAX port) through the tree mode's SGLang preset, on a CPU.

sgl-jax ships two versions of SGLang's ``tree_speculative_sampling_target_only``:

* ``python/sgl_jax/srt/kernels/speculative/kernel.py``: plain JAX with Python loops, the one its
  EAGLE worker calls (``speculative/eagle_info.py``);
* ``python/sgl_jax/srt/kernels/speculative/tree_speculative_sampling_target_only_kernel.py``: the
  Pallas kernel (``_tree_speculative_sampling_target_only_kernel``), run here in Pallas's TPU
  interpret mode (``pl.pallas_call(..., interpret=pltpu.InterpretParams(out_of_bounds_reads=
  "uninitialized"))``, as the kernel's ``disable_bounds_checks=True`` runs it). Its final-token
  draw searches ``probs_cumsum``, whose loop body returns the old sum and discards the array that
  ``csum_arr.at[i].set(new_sum)`` returns, so the cumulative sum it searches is never written.

The script reads both files from an sgl-jax checkout (``--sgl-jax``), stubs the two sgl-jax helpers
they import (``cdiv``; ``float32_bsearch``/``topk_mask``, unused by these functions), and runs:

1. the plain-JAX function through the preset (law mode, top-k trees);
2. the released Pallas kernel as shipped (does it trace?);
3. the Pallas kernel with what it needs to run here and nothing else: its two trace errors fixed
   and 128 columns of padding past each row, where the TPU, running with
   ``disable_bounds_checks=True``, reads and writes the 128-wide windows ``pl.ds(token, 128)``
   past the row end;
4. the same with ``accept_index[:, 0]`` written after the kernel's -1 initialisation (which
   overwrites it) instead of before;
5. the same with the cumulative sum written back as well (a control).

It states the exact TV of "the final token is always token 0" on the instance, what 4 shows if
the cumulative sum stays unwritten (jnp.empty is zeros, and argmax of an all-False mask is 0). Needs
``pip install jax`` (CPU) in the environment; jax is not a dependency of spectheory.

    OMP_NUM_THREADS=1 python benchmarks/tree_sgl_jax.py --sgl-jax /path/to/sglang-jax
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

from spectheory.engine.drafttrees import tree_shape
from spectheory.engine.output import target_law
from spectheory.testing.tree import (_draft_outcomes, _spread, check_tree_sampler,
                                     conditional_tree_law, tied_instance)
from spectheory.testing.tree_ports import SGLANG_TREE, tree_engine_sampler

KERNELS = "python/sgl_jax/srt/kernels/speculative"
CHOICES = [[0], [1], [0, 0], [0, 1], [1, 0]]


def _stub_sgl_jax():
    common = types.ModuleType("sgl_jax.srt.utils.common_utils")
    common.cdiv = lambda a, b: -(-a // b)
    search = types.ModuleType("sgl_jax.srt.layers.binary_search")
    search.float32_bsearch = search.topk_mask = None
    for name in ("sgl_jax", "sgl_jax.srt", "sgl_jax.srt.utils", "sgl_jax.srt.layers"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sgl_jax.srt.utils.common_utils"] = common
    sys.modules["sgl_jax.srt.layers.binary_search"] = search


def _load(path: Path, name: str, edits=()):
    text = path.read_text()
    for old, new in edits:
        if old not in text:
            raise SystemExit(f"{path}: expected text not found: {old!r}")
        text = text.replace(old, new)
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    exec(compile(text, str(path), "exec"), mod.__dict__)
    return mod


def _engine_fn(jax_fn, pallas: bool):
    """sgl-jax's function (functional: returns accept_index, accept_token_num, predicts; target
    probabilities as [bs * n, V]) in the in-place torch layout of the SGLang preset."""
    import jax.numpy as jnp

    def fn(predicts, accept_index, accept_token_num, candidates, retrive_index,
           retrive_next_token, retrive_next_sibling, uniform_samples,
           uniform_samples_for_final_sampling, target_probs, draft_probs,
           threshold_single=1.0, threshold_acc=1.0, deterministic=True):
        bs, n, V = target_probs.shape
        i32 = lambda t: jnp.asarray(t.numpy().astype(np.int32))  # noqa: E731
        f32 = lambda t: jnp.asarray(t.numpy().astype(np.float32))  # noqa: E731
        out = jax_fn(predicts=i32(predicts), accept_index=i32(accept_index),
                     accept_token_num=i32(accept_token_num), candidates=i32(candidates),
                     retrive_index=i32(retrive_index), retrive_next_token=i32(retrive_next_token),
                     retrive_next_sibling=i32(retrive_next_sibling),
                     uniform_samples=f32(uniform_samples),
                     uniform_samples_for_final_sampling=f32(uniform_samples_for_final_sampling),
                     target_probs=f32(target_probs.reshape(bs * n, V)),
                     draft_probs=f32(draft_probs.reshape(bs * n, V)),
                     threshold_single=threshold_single, threshold_acc=threshold_acc,
                     deterministic=deterministic)
        acc_idx, acc_num, pred = (torch.from_numpy(np.asarray(x).astype(np.int64)) for x in out)
        accept_index.copy_(acc_idx)
        accept_token_num.copy_(acc_num)
        predicts.copy_(pred)

    fn.__name__ = fn.__qualname__ = "sgl_jax_pallas" if pallas else "sgl_jax_reference"
    return fn


def _token_zero_tv(inst, tree) -> Fraction:
    """Exact TV to the target when the walk is SGLang's rule but the final token is always 0."""
    tree = tree_shape(tree)
    ex = inst.to_exact()
    V, D = ex.vocab_size, tree.height
    (tokens, _), = _draft_outcomes(ex, tree, "topk")
    pidx = [0] * tree.n_nodes
    for u in tree.preorder():
        for c in tree.children[u]:
            pidx[c] = pidx[u] * V + tokens[c - 1]
    rows = lambda m: np.array([m.level(tree.depth[u])[pidx[u]]  # noqa: E731
                               for u in range(tree.n_nodes)], dtype=object)
    paths, law = conditional_tree_law("sglang-tree", tree, list(tokens), rows(ex.draft),
                                      rows(ex.target))
    tl = [np.ascontiguousarray(ex.target.level(d)) for d in range(D + 1)]
    out = np.empty(V ** (D + 1), dtype=object)
    out.fill(Fraction(0))
    for g, pth in enumerate(paths):
        mass = sum(law[g], Fraction(0))
        if mass:
            _spread(out, tuple(pth) + (0,), mass, tl, V, D)
    tgt = target_law(tl, D + 1)[0]
    return sum((abs(a - b) for a, b in zip(out, tgt)), Fraction(0)) / 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sgl-jax", required=True, help="path of an sgl-jax checkout")
    ap.add_argument("--samples", type=int, default=600)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    root = Path(args.sgl_jax) / KERNELS
    _stub_sgl_jax()
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    print(f"jax {jax.__version__}, torch {torch.__version__}, {args.samples} samples a check")
    inst = [tied_instance(3, 2).to_float()]
    ref = _load(root / "kernel.py", "sgl_jax_kernel")
    for tree in ((2, 1), CHOICES):
        t = time.perf_counter()
        rep = check_tree_sampler(tree_engine_sampler(_engine_fn(
            ref.tree_speculative_sampling_target_only, False), SGLANG_TREE), tree=tree,
            instances=inst, samples=args.samples)
        print(f"\n[1] kernel.py tree_speculative_sampling_target_only, tree {tree}: "
              f"{'PASS' if rep.passed else 'FAIL'} ({time.perf_counter() - t:.0f} s)\n{rep}")
    # the kernel reads a 128-wide window at each drafted token (pl.ds(token, 128)) and uses its
    # first entry; on a TPU it runs with disable_bounds_checks=True, so the window may run past
    # the row: interpret mode is told to let such reads return uninitialized values likewise
    pl.pallas_call = functools.partial(pl.pallas_call, interpret=pltpu.InterpretParams(
        out_of_bounds_reads="uninitialized"))
    pallas_file = root / "tree_speculative_sampling_target_only_kernel.py"
    run = [("            return ()\n", "            return _\n"),  # fori_loop carry: None, not ()
           ("csum_arr.at[i].set(new_sum)", "csum_arr.at[i].set(new_sum[0])"),  # (1,) into ()
           # room past each row for the 128-wide windows the TPU reads and writes unchecked
           ("    aligned_vocab_size = align_to(vocab_size, 128)\n",
            "    aligned_vocab_size = align_to(vocab_size, 128) + 128\n")]
    order = [("    # init accept_index to -1\n    init_accept_index()\n",
              "    # init accept_index to -1\n    init_accept_index()\n"
              "    o_accept_index_ref.at[bid, 0].set(last_accepted_retrive_idx)\n")]
    written = [("            csum_arr.at[i].set(new_sum[0])\n            return sum, csum_arr\n",
                "            csum_arr = csum_arr.at[i].set(new_sum[0])\n"
                "            return new_sum[0], csum_arr\n")]
    for label, edits in (("[2] Pallas kernel as released", ()),
                         ("[3] Pallas kernel made to run (trace errors, room for the windows)",
                          run),
                         ("[4] ... and accept_index[:, 0] set after the -1 initialisation",
                          run + order),
                         ("[5] ... and the cumulative sum written (control)",
                          run + order + written)):
        mod = _load(pallas_file, "sgl_jax_pallas", edits)
        sampler = tree_engine_sampler(_engine_fn(
            mod.tree_speculative_sampling_target_only_pallas_call, True), SGLANG_TREE)
        t = time.perf_counter()
        try:
            rep = check_tree_sampler(sampler, tree=CHOICES, instances=inst,
                                     samples=args.samples)
        except Exception as exc:  # noqa: BLE001 - report what the released code does
            print(f"\n{label}: raises {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            continue
        print(f"\n{label}, tree {CHOICES}: {'PASS' if rep.passed else 'FAIL'} "
              f"({time.perf_counter() - t:.0f} s)\n{rep}")
    tv = _token_zero_tv(tied_instance(3, 2), CHOICES)
    print(f"\nexact TV of 'final token always 0' on tied_instance(3, 2), tree {CHOICES}: "
          f"{tv} = {float(tv):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
