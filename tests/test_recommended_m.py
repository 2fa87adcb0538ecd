"""A layout file's recommended m (metadata.micro_batches) is taken by every reader; a tampered file is refused.

Readers: ``spare-opt plan``, ``validate``, ``replay``, ``simulate --layout``,
``ReorderController``, ``agreed_plan``, ``PlanBook`` (and through it ``SpareGroup``,
``SpareBatchSampler``, ``TorchFTPlan``).  An explicit different m is used with a
``RecommendationWarning`` (the CLI: one ``Warning:`` line).
"""

import json
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import spare_opt
from spare_opt import (
    Layout,
    LayoutError,
    LayoutFileError,
    RecommendationWarning,
    ReorderController,
    agreed_plan,
    layout_fingerprint,
    plan_reorder,
    synthetic_fault_trace,
)
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main

N, R, M = 12, 3, 2


def recommended(m=M, groups=N, offsets=(0, 1, 3)):
    """A layout as ``compare -o`` writes it: recommended m and the recommendation's fingerprint."""
    stacks = (np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups
    base = Layout(stacks, method="sidon", offsets=list(offsets))
    recommendation = {"version": 1, "spare": {"strategy": "spare", "redundancy": len(offsets), "micro_batches": m},
                      "fingerprint": layout_fingerprint(base)}
    return Layout(stacks, method="sidon", offsets=list(offsets),
                  metadata={"micro_batches": m, "recommendation": recommendation})


@pytest.fixture
def rec_file(tmp_path):
    path = tmp_path / "rec.json"
    recommended().save(path)
    return path


def tampered(path, tmp_path, change, name="bad.json"):
    doc = json.loads(path.read_text())
    change(doc)
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out


def _swap_rows(doc):
    doc["stacks"][0], doc["stacks"][1] = doc["stacks"][1], doc["stacks"][0]
    doc["offsets"], doc["method"] = None, "custom"


def _set(key, value):
    def change(doc):
        if key == "fingerprint":
            doc["metadata"]["recommendation"]["fingerprint"] = value
        else:
            doc["metadata"][key] = value
    return change


TAMPERINGS = {
    "rows swapped": (_swap_rows, "fingerprint"),
    "garbage fingerprint": (_set("fingerprint", "garbage"), "fingerprint"),
    "fingerprint a number": (_set("fingerprint", 7), "no fingerprint"),
    "no fingerprint": (lambda doc: doc["metadata"]["recommendation"].pop("fingerprint"), "no fingerprint"),
    "recommendation a list": (_set("recommendation", [1]), "must be an object"),
    "m a word": (_set("micro_batches", "sixteen"), "'sixteen'"),
    "m huge": (_set("micro_batches", 10**40), "a huge integer"),
    "m negative": (_set("micro_batches", -3), "-3"),
    "m zero": (_set("micro_batches", 0), "got 0"),
    "m true": (_set("micro_batches", True), "True"),
    "m fractional": (_set("micro_batches", 2.5), "2.5"),
    "m above the limit": (_set("micro_batches", 1025), "1025"),
}


# ------------------------------------------------------------------ the file
@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_a_tampered_recommendation_is_a_layout_file_error(rec_file, tmp_path, case):
    change, words = TAMPERINGS[case]
    bad = tampered(rec_file, tmp_path, change)
    with pytest.raises(LayoutFileError, match="micro_batches|recommendation") as caught:
        Layout.load(bad)
    assert words in str(caught.value) and str(bad) in str(caught.value)
    npz = tmp_path / "bad.npz"  # the .npz header is read by the same rules
    doc = json.loads(bad.read_text())
    from spare_opt.layouts.layout import _npz_bytes

    stacks = np.asarray(doc.pop("stacks"), dtype=np.int32)
    npz.write_bytes(_npz_bytes({"stacks": stacks, "header": np.array(json.dumps(doc))}))
    with pytest.raises(LayoutFileError, match="micro_batches|recommendation"):
        Layout.load(npz)


def test_the_untampered_file_loads_and_carries_its_m(rec_file):
    layout = Layout.load(rec_file)
    assert layout.micro_batches == M and layout.recommendation["fingerprint"] == layout_fingerprint(layout)
    assert pickle.loads(pickle.dumps(layout)).micro_batches == M
    assert spare_opt.consecutive(6, 2).micro_batches is None and spare_opt.consecutive(6, 2).recommendation is None
    # a plain layout with an m and no recommendation (``spare-opt layout --micro-batches``) is honoured too
    plain = Layout(recommended().stacks, metadata={"micro_batches": 4})
    assert ReorderController(plain).micro_batches == 4
    with pytest.raises(LayoutError, match="micro_batches"):
        Layout(recommended().stacks, metadata={"micro_batches": "4"})


def test_the_limit_is_the_planners():
    from spare_opt.layouts.layout import _MAX_RECOMMENDED_M

    assert _MAX_RECOMMENDED_M == spare_opt.MAX_MICRO_BATCHES


def test_a_real_compare_file_loads_and_refuses_its_stacks_swapped(tmp_path):
    trace = write_fault_trace(synthetic_fault_trace(nodes=12, days=20.0, seed=5, incidents_per_day=1.0,
                                                    repair_median_days=0.5), tmp_path / "t.json")
    out = tmp_path / "rec.json"
    result = CliRunner().invoke(main, ["compare", "--trace", str(trace), "--rep-r", "2", "--spare-r", "3",
                                       "--micro-batches", "1", "--seeds", "1", "--no-elastic", "--cycles", "1",
                                       "-q", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert Layout.load(out).micro_batches == 1
    bad = tampered(out, tmp_path, _swap_rows)
    refused = CliRunner().invoke(main, ["plan", str(bad), "--fail", "1"])
    assert refused.exit_code == 1 and "fingerprint" in refused.output and "Traceback" not in refused.output


# ------------------------------------------------------------------- the CLI
def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def trace_file(tmp_path):
    return write_fault_trace(synthetic_fault_trace(nodes=12, days=10.0, seed=2, incidents_per_day=1.5,
                                                   repair_median_days=0.3), tmp_path / "trace.json")


def test_every_command_takes_the_files_m(rec_file, trace_file):
    plan = _invoke("plan", rec_file, "--fail", "1", "--json")
    assert plan.exit_code == 0, plan.output
    doc = json.loads(plan.stdout)
    assert doc["micro_batches"] == M and doc["load"] == plan_reorder(recommended(), [1], micro_batches=M).load
    assert "Warning" not in plan.stderr
    validate = _invoke("validate", rec_file, "--trials", "0", "--worst-k", "1", "--json")
    assert validate.exit_code == 0, validate.output
    assert json.loads(validate.stdout)["micro_batches"] == M
    replay = _invoke("replay", rec_file, "--trace", trace_file, "--placement-seed", "0", "--json", "-q")
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["micro_batches"] == M
    simulate = _invoke("simulate", "--layout", rec_file, "--trace", trace_file, "--seeds", "1", "--json", "-q")
    assert simulate.exit_code == 0, simulate.output
    assert json.loads(simulate.stdout)["micro_batches"] == M


def test_an_explicit_other_m_is_used_with_one_warning_line(rec_file, trace_file):
    plan = _invoke("plan", rec_file, "--fail", "1", "--micro-batches", "4", "--json")
    assert plan.exit_code == 0 and json.loads(plan.stdout)["micro_batches"] == 4
    assert plan.stderr.count("Warning: the layout recommends m = 2") == 1, plan.stderr
    same = _invoke("plan", rec_file, "--fail", "1", "--micro-batches", str(M))
    assert same.exit_code == 0 and "Warning" not in same.stderr
    validate = _invoke("validate", rec_file, "--trials", "20", "--worst-k", "1", "--micro-batches", "1", "--json",
                       "-q")
    assert validate.exit_code == 0 and json.loads(validate.stdout)["micro_batches"] == 1
    assert validate.stderr.count("Warning: the layout recommends") == 1, validate.stderr
    simulate = _invoke("simulate", "--layout", rec_file, "--trace", trace_file, "--seeds", "2",
                       "--micro-batches", "4", "--json", "-q")
    assert simulate.exit_code == 0 and json.loads(simulate.stdout)["micro_batches"] == 4
    assert simulate.stderr.count("Warning: the layout recommends") == 1, simulate.stderr


@pytest.mark.parametrize("case", ["rows swapped", "m a word", "m huge"])
@pytest.mark.parametrize("command", ["plan", "validate", "replay", "simulate"])
def test_every_command_refuses_a_tampered_file_in_one_line(rec_file, trace_file, tmp_path, command, case):
    bad = tampered(rec_file, tmp_path, TAMPERINGS[case][0])
    args = {"plan": ["plan", bad, "--fail", "1"], "validate": ["validate", bad, "--trials", "0"],
            "replay": ["replay", bad, "--trace", trace_file, "-q"],
            "simulate": ["simulate", "--layout", bad, "--trace", trace_file, "-q"]}[command]
    result = _invoke(*args)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1 and "Traceback" not in result.output


# ------------------------------------------------------------------- the API
def test_the_planners_take_the_layouts_m_and_warn_once_on_another():
    layout = recommended()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning when nothing else is asked
        assert ReorderController(layout).micro_batches == M
        assert ReorderController(layout).fail(1).load == plan_reorder(layout, [1], micro_batches=M).load
        assert agreed_plan(layout, [1, 5]).micro_batches == M
        assert agreed_plan(layout, [1, 5], method="exact").load == agreed_plan(layout, [1, 5]).load
        assert ReorderController(layout, micro_batches=M).micro_batches == M  # the same m: no warning
    with pytest.warns(RecommendationWarning, match="recommends m = 2.*m = 4 was given"):
        assert ReorderController(layout, micro_batches=4).micro_batches == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert agreed_plan(layout, [3], micro_batches=4).micro_batches == 4  # said once per layout and m
        assert ReorderController(pickle.loads(pickle.dumps(layout)), micro_batches=4).micro_batches == 4
    with pytest.warns(RecommendationWarning, match="m = 1 was given"):
        assert agreed_plan(layout, [3], micro_batches=1).micro_batches == 1


def test_a_layout_whose_m_was_changed_in_memory_is_refused_by_every_reader():
    layout = recommended()
    layout.metadata["micro_batches"] = "sixteen"
    for reader in (lambda: ReorderController(layout), lambda: agreed_plan(layout, [1])):
        with pytest.raises(LayoutError, match="sixteen"):
            reader()


def test_plan_book_and_torchft_plan_take_the_layouts_m():
    pytest.importorskip("torch")
    from spare_opt.torch._plans import PlanBook

    layout = recommended()
    book = PlanBook(layout)
    assert book.micro_batches == M and book.plan([4]).load == plan_reorder(layout, [4], micro_batches=M).load
    pytest.importorskip("torchft")
    import torch

    from spare_opt.torch import TorchFTPlan

    small = recommended(groups=4, offsets=(0, 1))
    adapters = [TorchFTPlan(small) for _ in range(4)]
    assert {a.book.micro_batches for a in adapters} == {M}
    members = [0, 2, 3]
    seen = []
    for g in members:
        adapters[g]._on_quorum(f"spare_{g}", len(members), 3, 1, members)
        seen += [int(i) for part in adapters[g].local_batches(torch.arange(4 * M)) for i in part]
    assert sorted(seen) == list(range(4 * M))  # one sample per micro-batch: N m of them
    with pytest.raises(spare_opt.ParameterError, match="multiple of N m"):
        adapters[0].local_batches(torch.arange(4 * M + 4))  # a multiple of N, not of N m
    layout.metadata["micro_batches"] = -3
    with pytest.raises(LayoutError, match="-3"):
        TorchFTPlan(layout)


@pytest.mark.slow
def test_spare_group_and_its_sampler_take_the_layouts_m(tmp_path):
    """One DP group (N = 1) on a real TCPStore and gloo, in a fresh process (it sets up torch.distributed)."""
    pytest.importorskip("torch")
    path = tmp_path / "one.json"
    recommended(m=3, groups=1, offsets=(0,)).save(path)
    code = textwrap.dedent(f"""
        import datetime, json, warnings
        import torch.distributed as dist
        import spare_opt
        from spare_opt.torch import SpareBatchSampler, SpareGroup
        layout = spare_opt.Layout.load({str(path)!r})
        store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            group = SpareGroup(layout, 0, store, timeout=30)
        try:
            sampler = SpareBatchSampler(group, dataset_size=60, global_batch_size=6, steps=1, shuffle=False)
            batches = [list(b) for b in sampler]
            try:
                SpareBatchSampler(group, dataset_size=60, global_batch_size=4, steps=1)
                refused = False
            except spare_opt.ParameterError:
                refused = True
            print(json.dumps({{"m": group.micro_batches, "load": group.plan.load, "batches": batches,
                              "refused": refused}}))
        finally:
            group.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["m"] == 3 and result["load"] == 3 and result["refused"]
    assert result["batches"] == [[0, 1], [2, 3], [4, 5]]  # m = 3 micro-batches of B / (N m) = 2 samples
