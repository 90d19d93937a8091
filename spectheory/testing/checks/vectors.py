"""Language-neutral test vectors: a verifier's exact law on small instances, as JSON.

An implementation of a verifier in another language (a CUDA kernel, a Rust sampler, a serving
engine's rejection sampler) can be tested against these files without running Python: each file
holds one (verifier, instance, K, drafting) and, in exact rationals written as fraction strings,

* the instance (the JSON format of [`spectheory.inputs.instances`][spectheory.inputs.instances]);
* the pmf of tau and the expected number of accepted tokens;
* for every joint draft of positive probability, its probability and the verifier's conditional
  law given it: ``stop[k][i] = P(path k, tau = i | drafts)`` and ``correction[k][i][y]``;
* the output law of "output block, then target sampling" over all V**(L+1) sequences, the target
  law and their total variation (0 for a lossless verifier);
* fixed-uniform decisions: for given uniforms (u0, u1), the (path, tau, Y) that the inverse-CDF
  sampler [`sample_output`][spectheory.sampling.sample_output] draws from that law (u0 picks (k,
  tau) over the flattened stop row, u1 picks Y from the chosen correction row).

The schema is documented in ``docs/vectors.md`` (field ``schema`` = `SCHEMA`).
[`export_vectors`][spectheory.testing.checks.vectors.export_vectors] writes a directory atomically
(a temporary directory renamed into place: nothing half-written),
[`check_vectors`][spectheory.testing.checks.vectors.check_vectors] recomputes every file and names
the first field that differs. The exact law is the one of Sun et al. (arXiv 2403.10444, sec. 2);
multi-path drafting schemes as in [`spectheory.engine.joint`][spectheory.engine.joint].
"""

from __future__ import annotations

import json
import os
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from ...runtime._lazy import torch

from ...runtime import backend as Bk
from ...runtime.errors import OptionError, SizeLimitError, SpectheoryError, check_keys
from ...runtime.kept import Kept
from ...runtime.partial import partial_folder, release
from ...engine.analysis import analyze
from ...inputs.instances import (Instance, instance_from_dict, instance_to_dict, load_instance,
                                 parse_json, plain_fraction)
from ...law import Law, validate_law
from ...inputs.models import prefix_from_index
from ...engine.joint import draft_rows, draft_weight
from ...registry import plan, registered
from ...sampling import sample_output
from ...engine.seqtree import levels, path_probabilities, sequence_tokens
from .battery import default_battery
from .calls import _kit_law
from ...runtime.limits import shown as _repr_cut

#: Schema identifier written into every file; bumped on any incompatible change.
SCHEMA = "spectheory-vectors/1"
#: Largest number of joint drafts V**(L K) one file may enumerate.
MAX_VECTOR_DRAFTS = 20_000
#: Uniform pairs per draft in ``decisions``.
DEFAULT_DECISIONS = 2
#: Most uniform pairs per draft (a file lists at most `MAX_VECTOR_DRAFTS` drafts, so at
#: most 2,000,000 decisions, about 200 MB of JSON).
MAX_DECISIONS = 100
#: Most paths K of a multi-path vector (as the exact engine's command line).
MAX_VECTOR_PATHS = 20
#: Seeds of the uniforms: 0 .. 2^63 - 1.
MAX_VECTOR_SEED = 2**63 - 1
#: The fields of a vector file, of one entry of ``drafts`` and of one entry of ``decisions``
#: (``docs/vectors.md``); [`check_file`][spectheory.testing.checks.vectors.check_file] refuses any
#: other, naming the nearest.
FIELDS = ("schema", "name", "verifier", "lossless", "paths", "drafting", "vocab_size",
          "block_length", "instance", "tau_pmf", "expected_accepted", "drafts", "output_law",
          "target_law", "sequences", "tv_to_target", "decisions")
#: The JSON type of each field of a vector file (``schema`` is compared with `SCHEMA`).
FIELD_TYPES = {"name": str, "verifier": str, "lossless": bool, "paths": int, "drafting": str,
               "vocab_size": int, "block_length": int, "instance": dict, "tau_pmf": list,
               "expected_accepted": str, "drafts": list, "output_law": list,
               "target_law": list, "sequences": list, "tv_to_target": str, "decisions": list}
_TYPE_WORDS = {str: "a string", bool: "true or false", int: "an integer", dict: "an object",
               list: "a list"}
DRAFT_FIELDS = ("paths", "probability", "stop", "correction")
DECISION_FIELDS = ("draft", "uniforms", "path", "tau", "token")
#: Uniforms are kept at least this far from every CDF boundary, so that an implementation's
#: float or exact inverse CDF gives the same index.
BOUNDARY_MARGIN = 1e-9


def _short_value(v) -> str:
    text = json.dumps(v) if not isinstance(v, (list, dict)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _fr(v) -> str:
    return str(Fraction(v))


def _joint_drafts(inst: Instance, K: int, drafting: str):
    """Joint drafts [n, K, L] of positive probability (lexicographic over path indices) and their
    exact probabilities [n]."""
    V, L = inst.vocab_size, inst.block_length
    total = V ** (L * K)
    if total > MAX_VECTOR_DRAFTS:
        raise SizeLimitError(f"test vectors for V = {V}, L = {L}, K = {K} would list "
                             f"V^(L K) = {total:,} joint drafts, over the limit of "
                             f"{MAX_VECTOR_DRAFTS:,}; use a smaller instance")
    q_levels = levels(inst.draft, 0, L, True)
    one = Bk.full((1,), 1, q_levels[0])
    qpath = path_probabilities(q_levels, one)[L]
    f = np.arange(total, dtype=np.int64)
    seq = (f.reshape(total, 1) // (V**L) ** np.arange(K - 1, -1, -1).reshape(1, K)) % V**L
    tail = path_probabilities(q_levels[1:], Bk.full((V,), 1, q_levels[0]))[L - 1]
    weight = draft_weight(seq, drafting, qpath, q_levels[0][0], tail, L, V)
    keep = np.array([w != 0 for w in weight], dtype=bool)
    seq, weight = seq[keep], weight[keep]
    drafts = sequence_tokens(seq.reshape(-1), L, V).reshape(len(seq), K, L)
    return drafts, weight


def _boundaries_ok(probs: list, u: float) -> bool:
    """u is at least BOUNDARY_MARGIN away from every partial sum of ``probs`` (exact)."""
    acc = Fraction(0)
    uf = Fraction(u)
    for p in probs[:-1]:
        acc += p
        if abs(uf - acc) < BOUNDARY_MARGIN:
            return False
    return True


def _exact_inverse_cdf(probs: list, u: float) -> int:
    """Smallest index k with u < CDF(k) (exact)."""
    acc = Fraction(0)
    uf = Fraction(u)
    for k, p in enumerate(probs):
        acc += p
        if uf < acc:
            return k
    return len(probs) - 1


def _decide(stop_f, corr_f, index, uniforms) -> list[tuple[int, int, int]]:
    """(path, tau, Y) of [`sample_output`][spectheory.sampling.sample_output] for uniform pairs
    ``uniforms`` [m, 2] on the laws of drafts ``index`` [m] (float64 laws ``stop_f`` [n, K, L+1],
    ``corr_f`` [n, K, L+1, V]); one batched call."""
    if len(uniforms) == 0:
        return []
    idx = torch.as_tensor(index, dtype=torch.int64)
    law = Law(torch.as_tensor(stop_f)[idx], torch.as_tensor(corr_f)[idx])
    k, tau, y = sample_output(law, uniforms=torch.tensor(uniforms, dtype=torch.float64))
    return list(zip(k.tolist(), tau.tolist(), y.tolist()))


def _draw_uniforms(stop, corr, rng, count: int) -> list[list[float]]:
    """``count`` uniform pairs for one draft's law, each at least `BOUNDARY_MARGIN` away
    from every partial sum it is compared with (checked in exact arithmetic)."""
    flat = list(stop.reshape(-1))
    L1 = stop.shape[1]
    out = []
    while len(out) < count:
        u0, u1 = (float(x) for x in rng.random(2))
        if not _boundaries_ok(flat, u0):
            continue
        j = _exact_inverse_cdf(flat, u0)
        if not _boundaries_ok(list(corr[j // L1, j % L1]), u1):
            continue
        out.append([u0, u1])
    return out


#: Exact laws kept (`_exact_laws`): `check_vectors` recomputes the laws of the files that
#: `export_vectors` wrote from them, and of the same instance under each verifier in turn.
EXACT_CACHE_SIZE = 32
_EXACT_CACHE = Kept(EXACT_CACHE_SIZE)


def _exact_laws(how, inst, drafts, q, p, n, K, L, V):
    """The exact per-draft law of ``how.spec`` on the joint ``drafts`` (``stop`` [n, K, L+1],
    ``correction`` [n, K, L+1, V] object arrays of Fractions, validated) and the fields of the
    exact analysis the vector writes (tau pmf, E[tau], output law, target law, TV to the target;
    exact rationals as text). All of it is a function of the verifier, K, the drafting scheme and
    the exact instance: for the toolkit's own verifiers (pure laws) it is kept per (spec, K,
    drafting, the instance as exact text) and handed out as fresh arrays and tuples (Fractions
    and strings are immutable). A ``module:function`` verifier is run every time."""
    key = None
    if _kit_law(how.spec):
        key = (how.spec, K, how.drafting,
               json.dumps(instance_to_dict(inst), sort_keys=True, separators=(",", ":")))
        hit = _EXACT_CACHE.get(key)
        if hit is not None:
            return hit[0].copy(), hit[1].copy(), hit[2]
    law = validate_law(how.spec.law(drafts, q, p), n, K, L, V, True, drafts, name=how.spec.name)
    stop = np.asarray(law.stop, dtype=object)
    corr = np.asarray(law.correction, dtype=object)
    res = analyze(inst, how.spec, exact=True, paths=K, drafting=how.drafting)
    summary = (tuple(_fr(v) for v in res.tau_pmf), _fr(res.expected_accepted),
               tuple(_fr(v) for v in res.output_law), tuple(_fr(v) for v in res.target_law),
               _fr(res.tv_to_target))
    if key is not None:
        _EXACT_CACHE.keep(key, (stop.copy(), corr.copy(), summary))
    return stop, corr, summary


def build_vector(verifier: Any, instance: Instance, name: str = "instance", *,
                 paths: int | None = None, drafting: str | None = None,
                 decisions: int = DEFAULT_DECISIONS, seed: int = 0,
                 uniforms: list | None = None) -> dict:
    """The test vector of one (verifier, instance, K, drafting), as a JSON-ready dict.

    Parameters
    ----------
    verifier :
        A verifier with an exact law (name, ``module:function``, spec or function).
    instance : Instance
        Converted to exact rationals (`to_exact`).
    name : str
        Name of the instance, written as ``name``.
    paths, drafting :
        K draft paths and their drafting scheme (defaults of [`plan`][spectheory.registry.plan]).
    decisions : int
        Uniform pairs per joint draft, drawn with ``numpy.random.default_rng(seed)`` and kept
        `BOUNDARY_MARGIN` away from every CDF boundary.
    uniforms : list, optional
        ``uniforms[d]`` = the uniform pairs of draft d (used instead of drawing; this is how
        [`check_vectors`][spectheory.testing.checks.vectors.check_vectors] recomputes a file's
        decisions).

    Returns
    -------
    dict
        The fields of ``docs/vectors.md``.
    """
    how = plan(verifier, paths, drafting)
    if not how.spec.exact:
        raise SpectheoryError(f"verifier {how.spec.name!r} has a float law only; test vectors "
                              f"need an exact rational law")
    check_decisions(decisions)
    check_vector_seed(seed)
    inst = instance.to_exact()
    V, L, K = inst.vocab_size, inst.block_length, how.paths
    drafts, weight = _joint_drafts(inst, K, how.drafting)
    n = len(drafts)
    q_levels = levels(inst.draft, 0, L, True)
    p_levels = levels(inst.target, 0, L + 1, True)
    q, p = draft_rows(q_levels, p_levels, drafts, L, V)
    stop, corr, summary = _exact_laws(how, inst, drafts, q, p, n, K, L, V)
    if uniforms is not None and len(uniforms) != n:
        raise SpectheoryError(f"{len(uniforms)} lists of uniforms for {n} joint drafts")
    rng = np.random.default_rng(seed)
    pairs, owner = [], []
    for d in range(n):
        u = (_given_uniforms(uniforms[d], d) if uniforms is not None
             else _draw_uniforms(stop[d], corr[d], rng, decisions))
        pairs.extend([float(a), float(b)] for a, b in u)
        owner.extend([d] * len(u))
    to_float = np.vectorize(float, otypes=[np.float64])
    chosen = _decide(to_float(stop), to_float(corr), owner, pairs)
    decided = [{"draft": d, "uniforms": pair, "path": k, "tau": t, "token": y}
               for d, pair, (k, t, y) in zip(owner, pairs, chosen)]
    entries = []
    for d in range(n):
        entries.append({
            "paths": [[int(x) for x in path] for path in drafts[d].tolist()],
            "probability": _fr(weight[d]),
            "stop": [[_fr(v) for v in row] for row in stop[d]],
            "correction": [[[_fr(v) for v in row] for row in per_k] for per_k in corr[d]],
        })
    return {
        "schema": SCHEMA,
        "name": name,
        "verifier": how.spec.name,
        "lossless": bool(how.spec.lossless),
        "paths": K,
        "drafting": how.drafting,
        "vocab_size": V,
        "block_length": L,
        "instance": instance_to_dict(inst),
        "tau_pmf": list(summary[0]),
        "expected_accepted": summary[1],
        "drafts": entries,
        "output_law": list(summary[2]),
        "target_law": list(summary[3]),
        "sequences": [list(prefix_from_index(j, L + 1, V)) for j in range(V ** (L + 1))],
        "tv_to_target": summary[4],
        "decisions": decided,
    }


def check_decisions(decisions, name: str = "decisions") -> int:
    """Uniform pairs per draft: an integer in [0, `MAX_DECISIONS`]."""
    if isinstance(decisions, bool) or not isinstance(decisions, (int, np.integer)) or \
            not 0 <= decisions <= MAX_DECISIONS:
        raise OptionError(f"{name} = {decisions!r} must be an integer in 0..{MAX_DECISIONS} "
                          f"(uniform pairs per joint draft)")
    return int(decisions)


def check_vector_seed(seed, name: str = "seed") -> int:
    """The seed of the uniforms: an integer in [0, 2^63 - 1]."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or \
            not 0 <= seed <= MAX_VECTOR_SEED:
        raise OptionError(f"{name} = {seed!r} must be an integer in 0..2^63-1")
    return int(seed)


def _file_name(verifier: str, paths: int, instance: str) -> str:
    clean = lambda s: re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "x"  # noqa: E731
    return f"{clean(verifier)}--K{paths}--{clean(instance)}.json"


def default_verifiers() -> list[str]:
    """Every registered verifier with an exact law (lossless ones and the lossy controls)."""
    return [n for n, s in registered().items() if s.exact]


def _instances(spec_list, paths: int) -> list[tuple[str, Instance]]:
    out = []
    for item in spec_list:
        if item == "battery":
            out.extend((b.name, b.instance) for b in default_battery(paths, exact=True))
        elif isinstance(item, Instance):
            out.append((f"instance{len(out)}", item))
        elif isinstance(item, tuple):
            out.append((str(item[0]), item[1]))
        else:
            out.append((Path(str(item)).stem, load_instance(str(item), exact=True)))
    return out


def export_vectors(directory, verifiers=None, instances=("battery",), *, paths: int = 2,
                   drafting: str | None = None, decisions: int = DEFAULT_DECISIONS,
                   seed: int = 0, progress: bool = False) -> list[str]:
    """Write one JSON file per (verifier, instance) into a new ``directory``; returns the names.

    ``verifiers`` default to
    [`default_verifiers`][spectheory.testing.checks.vectors.default_verifiers]; single-path
    verifiers get K = 1, multi-path ones K = ``paths``. ``instances`` lists ``"battery"`` (the
    default battery for that K), instance JSON files (exact fractions) or `Instance` objects.
    Everything is computed and written into a temporary directory next to ``directory``, which is
    then renamed into place: on any error nothing is left behind. ``directory`` must not exist, or
    be empty. ``progress``: a progress bar on stderr, one step per file.
    """
    from ...runtime.errors import check_flag

    if not isinstance(directory, (str, os.PathLike)) or not str(directory).strip():
        raise SpectheoryError(f"export_vectors: directory = {_repr_cut(directory, 40)} names no folder")
    for name, value in (("verifiers", verifiers), ("instances", instances)):
        if isinstance(value, (str, bytes)):  # iterated, it would be its characters
            raise SpectheoryError(f"export_vectors: {name} = {_repr_cut(value, 40)} must be a list (e.g. "
                                  f"[{_repr_cut(value, 30)}])")
    verifiers = None if verifiers is None else list(verifiers)  # a generator is read once
    instances = list(instances)
    for name, value in (("verifiers", verifiers), ("instances", instances)):
        if value is not None and not value:
            raise SpectheoryError(f"export_vectors: {name} is empty" + (
                "; leave it out (None) for the default verifiers" if name == "verifiers" else ""))
    check_flag(progress, "export_vectors: progress")
    target = Path(directory)
    try:
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise SpectheoryError(f"{directory}: already exists and is not an empty directory")
        parent = target.resolve().parent
    except OSError as exc:
        raise SpectheoryError(f"cannot write vectors to {str(directory)!r}: "
                              f"{exc.strerror or exc}") from None
    if not parent.is_dir():
        raise SpectheoryError(f"{str(parent)!r}: " + ("a file, not a directory" if parent.exists()
                                                      else "no such directory"))
    if isinstance(paths, bool) or not isinstance(paths, int) or not 1 <= paths <= \
            MAX_VECTOR_PATHS:
        raise OptionError(f"paths = {paths!r} must be an integer in 1..{MAX_VECTOR_PATHS}")
    check_decisions(decisions)
    check_vector_seed(seed)
    names = list(verifiers) if verifiers else default_verifiers()
    if drafting is not None and names and all(_single_path(v) for v in names):
        raise OptionError(f"drafting = {drafting!r} applies to multi-path verifiers; "
                          f"{', '.join(map(str, names))} "
                          f"{'is' if len(names) == 1 else 'are'} single-path (one draft path)")
    jobs = []
    for v in names:
        how = plan(v, 1 if _single_path(v) else paths, drafting if not _single_path(v) else None)
        if not how.spec.exact:
            raise SpectheoryError(f"verifier {how.spec.name!r} has a float law only; test "
                                  f"vectors need an exact rational law")
        for inst_name, inst in _instances(instances, how.paths):
            jobs.append((how, inst_name, inst))
    try:
        tmp = partial_folder(f".{target.name}.tmp-", parent)
    except OSError as exc:
        raise SpectheoryError(f"cannot write vectors to {str(directory)!r}: cannot create a "
                              f"folder in {str(parent)!r} ({exc.strerror or exc})") from None
    written = []
    bar = _bar(len(jobs), "vectors export", progress)
    try:
        for how, inst_name, inst in jobs:
            bar.set_postfix_str(f"{how.spec.name} on {inst_name}", refresh=False)
            vec = build_vector(how.spec, inst, inst_name, paths=how.paths,
                               drafting=how.drafting, decisions=decisions, seed=seed)
            fname = _file_name(how.spec.name, how.paths, inst_name)
            if fname in written:
                raise SpectheoryError(f"two vectors would be written to {fname}")
            try:
                with open(tmp / fname, "w", encoding="utf-8") as fh:
                    json.dump(vec, fh, separators=(",", ":"))
                    fh.write("\n")
            except OSError as exc:
                raise SpectheoryError(f"cannot write vectors to {str(directory)!r}: "
                                      f"{exc.strerror or exc}; nothing was written") from None
            written.append(fname)
            bar.update(1)
        bar.close()
        try:
            from ...runtime.files import folder_mode_for

            # the folder's mode as mkdir gives it, or the replaced empty folder's (mkdtemp's
            # 0700 came into place: a shared export folder lost its group's access)
            os.chmod(tmp, folder_mode_for(target))
            if target.exists():
                target.rmdir()
            os.rename(tmp, target)
        except OSError as exc:
            raise SpectheoryError(f"cannot write vectors to {str(directory)!r}: "
                                  f"{exc.strerror or exc}; nothing was written") from None
        release(tmp)  # moved in place: nothing left to remove
    except BaseException:
        bar.close()
        release(tmp)
        raise
    return written


def _bar(total: int, desc: str, enabled: bool):
    """A tqdm progress bar on stderr over ``total`` files (a silent stand-in when not
    ``enabled``)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="file", file=sys.stderr, disable=not enabled,
                leave=False)


def _single_path(v) -> bool:
    from ...registry import get_verifier

    return get_verifier(v).single_path


# ----------------------------------------------------------------------------- checking


class _Malformed(Exception):
    """A value of the file whose JSON type is not the one `vectors export` writes there."""


def _kind(v) -> str:
    """What a fresh value is, in words (its strings are fractions below the top level)."""
    return "a fraction string" if type(v) is str else _TYPE_WORDS.get(type(v), type(v).__name__)


def _diff(a, b, where: str):
    """First difference between the file's value ``a`` and the fresh ``b``: (field, a, b).
    A value of another JSON type than the fresh one (``0.0`` where the files write ``"0"``, a
    list for a number) raises `_Malformed`: the file is not a vector, whatever its values."""
    if type(a) is not type(b) and not (type(a) in (int, float) and type(b) in (int, float)):
        raise _Malformed(f"field {where or 'the file'} = {_short_value(a)} is not "
                         f"{_kind(b)}, as `vectors export` writes it")
    if isinstance(b, dict):
        if not isinstance(a, dict):
            return where, a, b
        for key in b:
            if key not in a:
                return f"{where}.{key}".lstrip("."), "(missing)", b[key]
            found = _diff(a[key], b[key], f"{where}.{key}".lstrip("."))
            if found:
                return found
        extra = [k for k in a if k not in b]
        if extra:
            return f"{where}.{extra[0]}".lstrip("."), a[extra[0]], "(no such field)"
        return None
    if isinstance(b, list):
        if not isinstance(a, list):
            return where, a, b
        if len(a) != len(b):
            return f"{where} (length)", len(a), len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            found = _diff(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(b, str) and isinstance(a, str) and a != b:  # "2/4" and "1/2" are one value
        try:
            fresh = plain_fraction(b, 4300)
        except (ValueError, ZeroDivisionError):  # a name, not a number: compared as text
            fresh = None
        if fresh is not None:
            try:
                mine = plain_fraction(a, 4300)
            except (ValueError, ZeroDivisionError):  # "NaN" where a fraction is written: the
                raise _Malformed(f"field {where} = {_short_value(a)} is not a fraction string, "
                                 "as `vectors export` writes it") from None  # file, no verdict
            if mine == fresh:
                return None
    if type(a) is bool or type(b) is bool:
        return None if a is b else (where, a, b)
    return None if a == b else (where, a, b)


def _is_uniform(u) -> bool:
    """A real number in [0, 1): floats, ints, Fractions, numpy and torch scalars; not bools or
    text (what a vector file's decisions and `build_vector`'s ``uniforms`` hold)."""
    if isinstance(u, (bool, np.bool_, str, bytes)):
        return False
    try:
        x = float(u)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return False
    return 0 <= x < 1


def _given_uniforms(pairs, d: int) -> list:
    """``uniforms[d]`` of `build_vector`: a list of pairs (u0, u1) of real numbers in [0, 1),
    else one line naming the argument (a pair of text or three numbers raised a bare
    ValueError)."""
    try:
        items = list(pairs)
    except TypeError:
        raise SpectheoryError(f"uniforms[{d}] = {_repr_cut(pairs, 40)} is not a list of pairs") from None
    for j, pair in enumerate(items):
        try:
            u0, u1 = pair
        except (TypeError, ValueError):
            raise SpectheoryError(f"uniforms[{d}][{j}] = {_repr_cut(pair, 40)} is not a pair (u0, u1)") \
                from None
        if not (_is_uniform(u0) and _is_uniform(u1)):
            raise SpectheoryError(f"uniforms[{d}][{j}] = {_repr_cut(pair, 40)}: each uniform must be a "
                                  f"real number in [0, 1)")
    return items


def _uniforms_of(data: dict, n_drafts: int, fname: str) -> list:
    dec = data.get("decisions")
    if not isinstance(dec, list):
        raise SpectheoryError(f"{fname}: field 'decisions' is not a list")
    most = MAX_DECISIONS * n_drafts  # export's bound (a million pairs took 33 s to check)
    if len(dec) > most:
        raise SpectheoryError(f"{fname}: {len(dec):,} decisions, over the {most:,} that `vectors "
                              f"export` writes at most ({MAX_DECISIONS} pairs for each of "
                              f"{n_drafts:,} joint drafts)")
    out = [[] for _ in range(n_drafts)]
    for j, item in enumerate(dec):
        try:
            d = item["draft"]
            u0, u1 = item["uniforms"]
        except (TypeError, KeyError, ValueError):
            raise SpectheoryError(f"{fname}: decisions[{j}] needs 'draft' and two 'uniforms'") \
                from None
        if not (_is_uniform(u0) and _is_uniform(u1)):
            raise SpectheoryError(f"{fname}: decisions[{j}].uniforms must be two numbers in "
                                  f"[0, 1)")
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < n_drafts:
            raise SpectheoryError(f"{fname}: decisions[{j}].draft = {d!r} is not a draft index "
                                  f"(0..{n_drafts - 1})")
        out[d].append([float(u0), float(u1)])
    return out


#: Longest vector file read (characters): the laws of the instances a vector holds (V^(L+1)
#: sequences within the exact engine's default guard) take far less.
MAX_VECTOR_CHARS = 256 * 2**20


def check_file(path, allow_import: bool = False) -> tuple[str, Any, Any] | None:
    """Recompute one vector file; None when it matches, else (field, file value, fresh value).

    A vector file is data: its ``verifier`` must be a registered name or a parametric rule
    (``additive(1/4)``). A ``module:function`` there would be imported, running whatever module a
    downloaded file names; it is refused unless ``allow_import`` (``--allow-import``: the vectors
    of one's own verifier, exported from one's own code).

    Raises [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError] for a file that cannot be read as
    a vector (unreadable JSON, a field not in `FIELDS` (or `DRAFT_FIELDS`, `DECISION_FIELDS` in its
    entries; named with the nearest valid one), wrong schema, unknown verifier, invalid instance,
    bad uniforms).
    """
    fname = os.path.basename(str(path))
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_VECTOR_CHARS + 1)  # bounded: a device such as /dev/zero ends
    except OSError as exc:
        raise SpectheoryError(f"{fname}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SpectheoryError(f"{fname}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    if len(text) > MAX_VECTOR_CHARS:
        raise SpectheoryError(f"{fname}: over {MAX_VECTOR_CHARS // 2**20} Mi characters, more "
                              "than a vector file holds; is it the right file?")
    data = parse_json(text, fname)  # duplicate keys and NaN refused, as in instance files
    if not isinstance(data, dict):
        raise SpectheoryError(f"{fname}: not a JSON object")
    check_keys(data, FIELDS, fname)
    if data.get("schema") != SCHEMA:
        raise SpectheoryError(f"{fname}: schema {data.get('schema')!r} is not {SCHEMA!r}")
    missing = [key for key in FIELDS if key not in data]  # every file has every field
    if missing:  # a file without output_law was a MISMATCH verdict, not a malformed file
        raise SpectheoryError(f"{fname}: missing field {missing[0]!r}"
                              + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                              + "; a vector file has every field that `vectors export` writes")
    for field, kind in FIELD_TYPES.items():  # a null drafting or a "yes" lossless is malformed,
        value = data[field]                   # not a mismatch of the verifier's vectors
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SpectheoryError(f"{fname}: field {field!r} = {_short_value(value)} is not "
                                  f"{_TYPE_WORDS[kind]}, as `vectors export` writes it")
    for field, valid in (("drafts", DRAFT_FIELDS), ("decisions", DECISION_FIELDS)):
        items = data[field]
        for j, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                check_keys(item, valid, f"{fname}: {field}[{j}]")
                gone = [k for k in valid if k not in item]
                if gone:
                    raise SpectheoryError(f"{fname}: {field}[{j}] is missing field {gone[0]!r}")
    verifier = data["verifier"]
    if isinstance(verifier, str) and ":" in verifier and not allow_import:
        shown = verifier if len(verifier) <= 60 else verifier[:57] + "..."
        raise SpectheoryError(f"{fname}: verifier {shown!r} is user code (module:function); a "
                              f"vector file is data and names no module to import: check your "
                              f"own verifier's vectors with --allow-import")
    try:  # the file is named in these refusals too
        inst = instance_from_dict(data["instance"], exact=True)
        how = plan(verifier, data["paths"], data["drafting"])
    except SpectheoryError as exc:
        try:
            named = type(exc)(f"{fname}: {exc}")
        except TypeError:  # a subclass with more arguments
            named = SpectheoryError(f"{fname}: {exc}")
        raise named from None
    V, L = inst.vocab_size, inst.block_length
    for field, size in (("vocab_size", V), ("block_length", L)):
        if data[field] != size:  # the file contradicts its own instance: no verdict on it
            raise SpectheoryError(f"{fname}: field {field!r} = {_short_value(data[field])} where "
                                  f"the file's instance has {size}, as `vectors export` writes "
                                  f"it")
    if isinstance(verifier, str) and ":" not in verifier and _single_path(verifier):
        written = plan(verifier, 1, None).drafting  # export refuses another scheme for it
        if data["drafting"] != written:
            raise SpectheoryError(f"{fname}: drafting {_repr_cut(data['drafting'], 40)} applies to "
                                  f"multi-path verifiers; {verifier} is single-path (`vectors "
                                  f"export` writes {written!r})")
    sizes = {"tau_pmf": (L + 1, "L + 1"), "output_law": (V ** (L + 1), "V^(L+1)"),
             "target_law": (V ** (L + 1), "V^(L+1)"), "sequences": (V ** (L + 1), "V^(L+1)")}
    for field, (size, formula) in sizes.items():
        if len(data[field]) != size:  # the file contradicts its own instance: no verdict on it
            raise SpectheoryError(f"{fname}: field {field!r} has {len(data[field]):,} entries "
                                  f"where the file's instance (V = {V}, L = {L}) has {formula} = "
                                  f"{size:,}, as `vectors export` writes it")
    drafts = data.get("drafts")
    n = len(drafts) if isinstance(drafts, list) else 0
    fresh_n = len(_joint_drafts(inst, how.paths, how.drafting)[0])
    uniforms = _uniforms_of(data, fresh_n, fname) if n == fresh_n else None
    fresh = build_vector(how.spec, inst, data["name"], paths=how.paths, drafting=how.drafting,
                         uniforms=uniforms)
    if uniforms is None:
        return "drafts (length)", n, fresh_n
    if isinstance(verifier, str) and verifier != how.spec.name:  # another spelling of the same
        data = {**data, "verifier": how.spec.name}  # rule ("additive(0.25)", "additive(1/4)"),
        # read to the same numbers by `plan`: no MISMATCH on the name
    try:
        return _diff(data, fresh, "")
    except _Malformed as exc:
        raise SpectheoryError(f"{fname}: {exc}") from None


def check_vectors(directory, progress: bool = False,
                  allow_import: bool = False) -> list[tuple[str, str, Any, Any]]:
    """Recompute every ``*.json`` file of ``directory``; returns the mismatches as
    (file, field, file value, fresh value), one per mismatching file (empty: all match).
    ``progress``: a progress bar on stderr, one step per file. ``allow_import``: files may name
    their verifier as ``module:function`` (see `check_file`).

    Raises [`SpectheoryError`][spectheory.runtime.errors.SpectheoryError] for a directory without vector
    files or a file that cannot be read as a vector.
    """
    from ...runtime.errors import check_flag

    if not isinstance(directory, (str, os.PathLike)):
        raise SpectheoryError(f"check_vectors: directory = {_repr_cut(directory, 40)} is not a path")
    check_flag(progress, "check_vectors: progress")
    check_flag(allow_import, "check_vectors: allow_import")
    d = Path(directory)
    if not d.is_dir():
        raise SpectheoryError(f"{directory}: not a directory")
    files = sorted(f for f in d.iterdir() if f.suffix == ".json" and f.is_file())
    if not files:
        raise SpectheoryError(f"{directory}: no vector files (*.json)")
    out = []
    bar = _bar(len(files), "vectors check", progress)
    try:
        for f in files:
            bar.set_postfix_str(f.name, refresh=False)
            found = check_file(f, allow_import)
            if found:
                out.append((f.name,) + tuple(found))
            bar.update(1)
    finally:
        bar.close()
    return out


__all__ = ["BOUNDARY_MARGIN", "DEFAULT_DECISIONS", "MAX_VECTOR_DRAFTS", "SCHEMA", "build_vector",
           "check_file", "check_vectors", "default_verifiers", "export_vectors"]
