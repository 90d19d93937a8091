"""The machine a benchmark ran on, for its recorded results (imported by the benchmark scripts,
which run with this folder first on ``sys.path``)."""

from __future__ import annotations

import platform
import subprocess


def cpu_name() -> str:
    """The CPU's model name (``lscpu``), else what ``platform.processor()`` says."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
