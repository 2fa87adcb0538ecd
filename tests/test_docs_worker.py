"""The minimal worker of docs/launch.md runs as printed: two DP groups, each under its own torchrun.

The worker is the ``python`` block of docs/launch.md that calls ``run_worker(main)``,
copied as a user would; both groups must finish and end with the same weights (the
exact gradient of the whole batch in each), print their progress, and save their
parameters for comparing runs.  It runs on its own layout, and on a recommendation that
``spare-opt compare -o`` wrote (``SPARE_LAYOUT``: ``Layout.load``), as the page deploys
one.  A real store, real launchers, gloo on CPU; every process tree is killed whole.
"""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from spare_opt.torch._processes import kill_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker_text():
    text = (REPO / "docs" / "launch.md").read_text(encoding="utf-8")
    worker = [block for block in re.findall(r"```python\n(.*?)\n```", text, flags=re.S) if "run_worker(main)" in block]
    assert len(worker) == 1, "docs/launch.md has one complete worker"
    assert "spare_opt.Layout.load(LAYOUT)" in worker[0], "the worker shows how a recommendation file is deployed"
    return worker[0]


def _recommendation(folder):
    """What the page's ``spare-opt compare ... -o recommendation.json`` writes, for N = 2 (one seed, one cycle)."""
    from click.testing import CliRunner
    from spare_opt_cli.main import main

    path = folder / "recommendation.json"
    result = CliRunner().invoke(main, ["compare", "-N", "2", "--failures-per-1000-node-days", "5", "--spare-r", "2",
                                       "--rep-r", "2", "--seeds", "1", "--cycles", "1", "--no-elastic",
                                       "--no-sensitivity", "--no-redistribution", "-q", "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("layout", ["its own", "a recommendation"])
def test_the_minimal_worker_of_the_launch_docs_runs_under_torchrun(tmp_path, layout):
    (tmp_path / "worker.py").write_text(_worker_text() + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("SPARE_LAYOUT", None)
    if layout == "a recommendation":
        env["SPARE_LAYOUT"] = str(_recommendation(tmp_path))
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
                stderr=subprocess.STDOUT, text=True))
        outputs = [process.communicate(timeout=300)[0] for process in groups]
    finally:
        for process in groups:  # torchrun and its worker (in a session of its own: a killpg misses it)
            kill_tree(process.pid)
            process.wait()
        store.terminate()
        store.wait(timeout=30)
    assert [process.returncode for process in groups] == [0, 0], outputs
    lines = [re.search(r"group (\d): 40 steps, weights ([0-9a-f]{16})", out) for out in outputs]
    assert all(lines), outputs
    assert lines[0].group(2) == lines[1].group(2), outputs  # the same weights in both groups
    for g, out in enumerate(outputs):
        assert re.search(rf"^group {g}: worker pid \d+$", out, flags=re.M), out
        progress = re.findall(rf"^group {g}: step (\d+) of 40, loss [0-9.]+$", out, flags=re.M)
        assert progress == ["10", "20", "30", "40"], out
    saved = [torch.load(tmp_path / f"spare-weights-g{g}.pt") for g in (0, 1)]
    assert all(torch.equal(saved[0][k], saved[1][k]) for k in saved[0])
    if layout == "a recommendation":  # the file was deployed: the job record of the checkpoint is its layout and m
        import spare_opt

        deployed = spare_opt.Layout.load(env["SPARE_LAYOUT"])
        record = torch.load(tmp_path / "spare-checkpoint.pt", weights_only=False)["spare_job"]
        assert (record["layout"], record["groups"], record["micro_batches"]) == \
            (deployed.fingerprint(), deployed.groups, deployed.micro_batches or 1)
