"""Output files written whole, never over what is not a regular file (spectheory.runtime.files):
a FIFO, a socket or a folder at the output path is refused in one line before anything is written
(a rename would have replaced the pipe or device itself with a plain file, as it did with
/dev/full), a symbolic link is written through (its target replaced, the link kept), and a new
file gets the umask's mode, not a temporary file's 0600."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from spectheory.runtime.errors import OptionError
from spectheory.runtime.files import atomic_file, output_path, write_bytes, write_text


def _socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    return s


def test_non_regular_paths_are_refused_and_left_as_they_were(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = _socket(sock_path)
    folder = tmp_path / "dir"
    folder.mkdir()
    link = tmp_path / "link-to-pipe"
    link.symlink_to(fifo)
    try:
        for path, kind in ((fifo, "a FIFO"), (sock_path, "a socket"), (folder, "a folder"),
                           (link, "a FIFO")):
            with pytest.raises(OptionError, match=f"it is {kind}, not a regular file") as exc:
                write_text(path, "x")
            assert "\n" not in str(exc.value)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISSOCK(os.stat(sock_path).st_mode)
        assert os.path.islink(link) and sorted(p.name for p in tmp_path.iterdir()) == \
            ["dir", "link-to-pipe", "pipe", "sock"]  # no temporary file left
    finally:
        sock.close()


def test_a_link_is_written_through_and_modes_follow_the_umask(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert os.path.islink(link) and target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # a replaced file keeps its mode
    old = os.umask(0o022)
    try:
        fresh = write_bytes(tmp_path / "sub" / "fresh.bin", b"\x00\x01")
    finally:
        os.umask(old)
    assert fresh.read_bytes() == b"\x00\x01" and stat.S_IMODE(os.stat(fresh).st_mode) == 0o644
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "created-on-write")
    assert output_path(dangling) == tmp_path / "created-on-write"


def test_an_error_inside_leaves_the_destination_as_it_was(tmp_path):
    dest = tmp_path / "rows.pt"
    dest.write_bytes(b"before")
    with pytest.raises(RuntimeError):
        with atomic_file(dest) as tmp:
            open(tmp, "wb").write(b"half")
            raise RuntimeError("interrupted")
    assert dest.read_bytes() == b"before" and os.listdir(tmp_path) == ["rows.pt"]


def test_the_real_model_and_sweep_outputs_refuse_a_fifo_before_any_work(tmp_path):
    """validate's output files are checked when the run is configured (before a model loads);
    sweep plot --figure before anything is drawn."""
    from spectheory.gpu_validation.experiments.record import RecordConfig
    from spectheory.sweep import plot

    fifo = tmp_path / "rows.pt"
    os.mkfifo(fifo)
    with pytest.raises(OptionError, match="it is a FIFO"):
        RecordConfig(out=str(fifo))
    from test_palette import sweep_rows, write_results

    write_results(tmp_path, sweep_rows())
    figure = tmp_path / "figure.png"
    os.mkfifo(figure)
    with pytest.raises(OptionError, match="--figure .* it is a FIFO"):
        plot.plot_sweep(tmp_path, figure=str(figure))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISFIFO(os.stat(figure).st_mode)


def test_an_error_starts_its_own_line_after_an_open_progress_bar(capsys):
    """A command failing while a tqdm bar is open (a user verifier raising inside validate's
    sample loop): the bar was drawn before the error on its line and again after it at exit;
    the bar is now closed first and the error is the last line, whole."""
    import sys

    from tqdm import tqdm

    from spectheory.cli import _fail

    bar = tqdm(total=300, desc="lossless samples", file=sys.stderr)
    bar.update(1)
    assert _fail("verifier 'umod:raises' raised RuntimeError: user boom") == 2
    bar.close()  # what the interpreter's exit would do: nothing more is drawn
    err = capsys.readouterr().err
    assert err.endswith("\nspectheory: error: verifier 'umod:raises' raised RuntimeError: user "
                        "boom\n")


@pytest.mark.parametrize("bad", ["", "a\0b", b"bytes.json", None, 5])
def test_what_is_not_a_file_name_is_refused_in_one_line(bad, tmp_path):
    """An empty path (read as the current folder), a NUL character (ValueError from the OS
    layer), bytes or a number (TypeError) are one OptionError line before anything is written."""
    with pytest.raises(OptionError, match="not a file name") as exc:
        write_text(bad, "x")
    assert "\n" not in str(exc.value)


def test_a_sweep_refuses_a_fifo_among_its_outputs_before_running_and_plot_never_blocks(tmp_path):
    """A FIFO at OUT/results.csv ran every job and was refused only at the end; at OUT/sweep.json
    its read blocked; `sweep plot` on a FIFO results.csv blocked for ever. All three are refused
    before any job or read."""
    from spectheory.sweep import plot
    from spectheory.sweep.config import load_config
    from spectheory.sweep.runner import run_sweep

    cfg = load_config('[[instances]]\nfamily = "random"\nvocab = 2\nblock = 2\nseeds = [0]\n'
                     '[[verifiers]]\nname = ["token"]\n')
    for name in ("results.csv", "sweep.json"):
        out = tmp_path / name.replace(".", "-")
        out.mkdir()
        os.mkfifo(out / name)
        with pytest.raises(OptionError, match=f"{name}': it is a FIFO"):
            run_sweep(cfg, out, workers=1)
        assert sorted(p.name for p in out.iterdir()) == [name]  # no job ran, no cache
    with pytest.raises(OptionError, match="results.csv: it is not a regular file"):
        plot.plot_sweep(tmp_path / "results-csv")
