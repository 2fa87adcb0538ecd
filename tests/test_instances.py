"""The instances written by instances/make_instances.py: the script runs and its files are current."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_make_instances_runs_and_keeps_every_existing_file():
    # It used to fail at import (spare_opt.demo.DEFAULT_TRACE_NAME was removed by the restructuring).
    result = subprocess.run([sys.executable, str(REPO / "instances" / "make_instances.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("kept ") for line in lines), result.stdout
