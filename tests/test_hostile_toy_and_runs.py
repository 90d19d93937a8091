"""Bad inputs of the toy families, the model cache's environment variable and the statistics'
counts, each refused in one line where before they gave a raw error, a hang, an instance of NaN
rows or a silent wrong answer:

* knobs past float's range (an alpha of 10^400: an OverflowError from ``float``), a mixture's
  denominator of 10^40 (an OverflowError in the rounding to exact rows), knobs at the edge of
  float64 (a sigma of 1e308: NaN draft rows returned), an n-gram text that is a named pipe with
  no writer (waited on for ever), an empty text path (read as the shipped text), a two-token seed
  of text (taken), an n-gram knob given as text or a numpy float (refused as out of range), and
  ``toy ''`` (printed the family listing, exit 0);
* ``$SPECTHEORY_CACHE`` blank or naming a file (taken, where ``--cache`` of the same is
  refused: a 98 MB model written into a folder named ' ').
"""

from __future__ import annotations

import json
import os
from fractions import Fraction

import numpy as np
import pytest

from spectheory.cli import main
from spectheory.runtime.errors import InstanceError, OptionError, SpectheoryError
import spectheory as st
import spectheory.toy_models as T


def _cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _refused(argv, capsys, words):
    code, out, err = _cli(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err
    return err


BIG = 10**400


@pytest.mark.parametrize("call,words", [
    (lambda: T.make_instance("dirichlet", alpha=BIG),
     "alpha = an integer of 401 digits is out of range [0.001, 1e+06]"),
    (lambda: T.make_instance("dirichlet", alpha=Fraction(BIG, 1)), "alpha = a fraction with a "
                                                                     "401-digit numerator"),
    (lambda: T.two_token(p0=BIG), "p0 = an integer of 401 digits is out of range [0, 1]"),
    (lambda: T.logit_noise(sigma=BIG), "sigma = an integer of 401 digits is out of range"),
    (lambda: T.logit_noise(sigma=-BIG), "sigma = an integer of 401 digits is out of range"),
    (lambda: T.mixture(eps=0.5, denominator=10**40), "denominator = 1000000000000000000000000"),
    (lambda: T.mixture(eps=0.5, denominator=2**62), "is out of range [1, 1,000,000,000]"),
    (lambda: T.dirichlet(denominator=0), "denominator = 0 is out of range [1, 1,000,000,000]"),
    (lambda: T.logit_noise(sigma=1e308), "sigma = 1e+308, temperature = 1: draft: the row after "
                                         "prefix"),
    (lambda: T.temperature(alpha=1e308), "alpha = 1e+308 is out of range [0.001, 1e+06]"),
    (lambda: T.markov(alpha=1e-300), "alpha = 1e-300 is out of range [0.001, 1e+06]"),
    (lambda: T.ngram_instance(smoothing=1e308), "ngram smoothing = 1e+308: target: the row"),
    (lambda: T.ngram_instance(text_path=""), "text_path is empty"),
    (lambda: T.ngram_instance(text_path=[1]), "text_path = [1] is not a file path"),
    (lambda: T.ngram_instance(draft_fraction=0), "draft_fraction = 0 is out of range (0, 1]"),
    (lambda: T.ngram_instance(smoothing="x"), "smoothing = 'x'"),
    (lambda: T.two_token(seed="banana"), "seed must be a non-negative integer, got 'banana'"),
    (lambda: T.two_token(seed=-5), "seed must be a non-negative integer, got -5"),
])
def test_toy_knobs_past_their_range_or_past_float64_are_refused(call, words):
    with pytest.raises(InstanceError) as exc:
        call()
    assert words in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_toy_knobs_read_as_the_other_families_read_them():
    """The n-gram family refused draft_fraction '1/2' and numpy's 0.5 as "out of range (0, 1]";
    the rows it builds from them are those of 0.5."""
    half = T.ngram_instance(draft_fraction=0.5, smoothing=0.5)
    for frac, k in (("1/2", "1/2"), (np.float32(0.5), np.float64(0.5)), (Fraction(1, 2), 0.5)):
        inst = T.ngram_instance(draft_fraction=frac, smoothing=k)
        for a, b in zip(inst.draft.tables, half.draft.tables):
            np.testing.assert_array_equal(a, b)
    assert T.two_token(seed=3).vocab_size == 2 and T.two_token(seed=None).vocab_size == 2


def test_an_ngram_text_that_is_a_pipe_with_no_writer_is_refused_not_waited_on(tmp_path,
                                                                             capsys):
    import threading

    fifo = tmp_path / "text"
    os.mkfifo(fifo)
    seen = []

    def call():
        try:
            T.ngram_instance(text_path=str(fifo))
        except InstanceError as exc:
            seen.append(str(exc))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # let the reader go (a writer that opens and closes: end of file)
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
    assert seen and "no writer wrote to the named pipe within 1 s" in seen[0], seen
    _refused(["toy", "ngram", f"text_path={fifo}"], capsys,
             "no writer wrote to the named pipe within 1 s")


def test_toy_command_refusals(tmp_path, capsys):
    _refused(["toy", "ngram", "text_path="], capsys, "text_path is empty")
    _refused(["toy", "dirichlet", f"alpha={BIG}"], capsys, "an integer of 401 digits")
    _refused(["toy", "two-token", "seed=banana"], capsys, "seed must be a non-negative integer")
    _refused(["toy", ""], capsys, "unknown toy family ''; choose from dirichlet")
    _refused(["toy", "--list", ""], capsys, "unknown toy family ''")
    code, out, err = _cli(["toy", "ngram", "draft_fraction=1/2", "smoothing=1/2"], capsys)
    assert code == 0 and json.loads(out)["vocab_size"] == 5, err
    code, out, _ = _cli(["toy"], capsys)  # no family: the listing
    assert code == 0 and out.startswith("family")
    assert list(tmp_path.iterdir()) == []


def test_the_cache_variable_is_held_to_the_options_rules(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("")
    for value, words in ((" ", "SPECTHEORY_CACHE=' ' names no folder (unset it for the default)"),
                         (str(afile), "is a file, not a folder")):
        monkeypatch.setenv("SPECTHEORY_CACHE", value)
        for argv in (["models", "list"], ["models", "path", "smollm2-135m"]):
            _refused(argv, capsys, words)
    monkeypatch.setenv("SPECTHEORY_CACHE", str(tmp_path / "new"))
    code, out, _ = _cli(["models", "list"], capsys)
    assert code == 0 and str(tmp_path / "new") in out
    monkeypatch.setenv("SPECTHEORY_CACHE", "")  # empty: unset, the default
    from spectheory.gpu_validation.fetch import cache_dir

    assert cache_dir() == cache_dir.__globals__["Path"].home() / ".cache" / "spectheory"
    with pytest.raises(OptionError):
        cache_dir(" ")


def test_ragged_grammar_laws_and_advice_that_names_what_the_command_takes(tmp_path, capsys,
                                                                          monkeypatch):
    """grammar_laws.total_variation of ragged lists raised numpy's own ValueError; a limit set by
    SPECTHEORY_MAX_SEQUENCES was refused in `report` with advice to use --max-sequences, which
    `report` does not take; a cache under /proc was "not enough disk space ... 0.00 GB free"."""
    from spectheory.inputs import grammar_laws as GL

    for a, b in (([[1], [0, 0]], [1, 0]), ([1, 0], [[1], [0, 0]])):
        with pytest.raises(OptionError, match="^laws must be flat lists or arrays of numbers"):
            GL.total_variation(a, b)
    monkeypatch.setenv("SPECTHEORY_MAX_SEQUENCES", "10")
    code, out, err = _cli(["report"], capsys)  # its progress lines, then the refusal
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1].endswith("raise the limit with SPECTHEORY_MAX_SEQUENCES (set to "
                                         "10 here) or a command's --max-sequences"), err
    monkeypatch.delenv("SPECTHEORY_MAX_SEQUENCES")
    # random_instance and a sweep's job take no max_sequences: the environment is named too
    with pytest.raises(SpectheoryError) as exc:
        st.random_instance(100_000, 3, 0)
    assert str(exc.value).endswith("raise the limit with --max-sequences (max_sequences= in "
                                   "Python) where the command or function takes it, else "
                                   "SPECTHEORY_MAX_SEQUENCES"), exc.value
    path = tmp_path / "inst.json"
    assert main(["instance", "random", "--vocab", "4", "--block", "4"]) == 0
    path.write_text(capsys.readouterr().out)
    err = _refused(["exact", str(path), "--max-sequences", "10"], capsys, "--max-sequences")
    assert "SPECTHEORY_MAX_SEQUENCES" not in err
    if os.path.isdir("/proc"):
        _refused(["models", "fetch", "smollm2-135m", "--cache", "/proc/nope", "--quiet"], capsys,
                 "/proc is on a file system that stores no files")

