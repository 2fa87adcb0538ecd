"""The minimal worker of docs/launch.md runs as printed: two DP groups, each under its own torchrun.

The worker is the ``python`` block of docs/launch.md that calls ``run_worker(main)``,
copied as a user would; both groups must finish and end with the same weights (the
exact gradient of the whole batch in each).  A real store, real launchers, gloo on CPU.
"""

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_minimal_worker_of_the_launch_docs_runs_under_torchrun(tmp_path):
    text = (REPO / "docs" / "launch.md").read_text(encoding="utf-8")
    worker = [block for block in re.findall(r"```python\n(.*?)\n```", text, flags=re.S) if "run_worker(main)" in block]
    assert len(worker) == 1, "docs/launch.md has one complete worker"
    (tmp_path / "worker.py").write_text(worker[0] + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    port = _free_port()
    store = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port", str(port)],
                             env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    groups = []
    try:
        for g in (0, 1):
            genv = dict(env, SPARE_GROUPS="2", SPARE_STORE=f"127.0.0.1:{port}", SPARE_GROUP=str(g))
            groups.append(subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                 "--max-restarts", "0", "worker.py"], env=genv, cwd=tmp_path, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, start_new_session=True))
        outputs = [process.communicate(timeout=240)[0] for process in groups]
    finally:
        for process in groups:  # torchrun and its workers (in sessions of their own: a killpg misses them)
            kill_tree(process.pid)
            process.wait()
        store.terminate()
        store.wait(timeout=30)
    assert [process.returncode for process in groups] == [0, 0], outputs
    lines = [re.search(r"group (\d): 40 steps, weights ([0-9a-f]{16})", out) for out in outputs]
    assert all(lines), outputs
    assert lines[0].group(2) == lines[1].group(2), outputs  # the same weights in both groups
