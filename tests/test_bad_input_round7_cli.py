"""Input hardening, round 7 (the CLI): a recommendation's version, run bounds named by their cause, a cluster file's BOM.

Same contract as ``tests/test_bad_input_round2.py``: the CLI prints one ``Error: ...``
line and exits non-zero (no traceback), the API raises the specific
:class:`spare_opt.SpareError` subclass.  Sections, after the bugs they pin: 1 a
recommendation whose ``version`` is no version number (its edited ``m`` was deployed
unchecked) or a future one; 2 a run that needs astronomically many failures, named by
the option or key whose value makes it so (it advised lowering the cycles); 3 a cluster
file that begins with a UTF-8 byte-order mark.
"""

import json

import pytest

import spare_opt as so
from spare_opt import Layout, LayoutFileError, ParameterError
from test_bad_input_round6_cli import FAST, cli, error_line  # the CLI runner, its one-line error and a small verdict


# ------------------------------------------------------------------ 1 a recommendation's version
@pytest.fixture(scope="module")
def recommendation(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "rec.json"
    result = cli("compare", "-N", 12, "--failures-per-1000-node-days", 5, *FAST, "-o", path)
    assert result.exit_code == 0, result.output
    return path


def _edited(path, tmp_path, version, drop_contents=True, edit_m=True):
    """The recommendation with ``version`` (``...``: the key deleted), its contents fingerprint gone, its m edited."""
    doc = json.loads(path.read_text())
    rec = doc["metadata"]["recommendation"]
    if version is ...:
        del rec["version"]
    else:
        rec["version"] = version
    if drop_contents:
        del rec["contents_fingerprint"]
    if edit_m:  # the edit the contents fingerprint would have caught
        doc["metadata"]["micro_batches"] = rec["spare"]["micro_batches"] = rec["chosen"]["micro_batches"] = 16
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("version, shown", [("2", "is the string '2'"), (2.0, "is 2.0"), (None, "is null"),
                                            (-5, "is -5"), (0, "is 0"), (True, "is true"), ([2], "is a JSON list"),
                                            (..., "is missing")],
                         ids=["'2'", "2.0", "null", "-5", "0", "true", "[2]", "missing"])
def test_a_recommendation_version_that_is_no_version_number_is_refused(recommendation, tmp_path, version, shown):
    """A version-2 file edited to version "2" (or 2.0, null, -5) without its contents fingerprint read as version 1."""
    edited = _edited(recommendation, tmp_path, version)
    with pytest.raises(LayoutFileError) as caught:
        Layout.load(edited)
    message = str(caught.value)
    assert message.startswith(f"{edited}: metadata.recommendation.version {shown}") and "integer 1 or 2" in message
    line = error_line(cli("plan", edited, "--fail", "1,2"), 1)
    assert "metadata.recommendation.version" in line


@pytest.mark.parametrize("version", [3, 999, 10**50])
def test_a_future_recommendation_version_is_refused_as_unsupported(recommendation, tmp_path, version):
    edited = _edited(recommendation, tmp_path, version, drop_contents=False, edit_m=False)
    with pytest.raises(LayoutFileError, match=r"version (\d+|a huge integer) is not supported: this spare-opt reads "
                                              r"versions 1 and 2"):
        Layout.load(edited)


def test_versions_1_and_2_are_read(recommendation, tmp_path):
    assert Layout.load(recommendation).metadata["recommendation"]["version"] == 2
    # Version 1 (before contents fingerprints): read, its m checked against the spare setting only.
    layout = Layout.load(_edited(recommendation, tmp_path, 1, edit_m=False))
    assert layout.metadata["recommendation"]["version"] == 1 and layout.micro_batches == 1


# ------------------------------------------------------------------ 2 run bounds named by their cause
ASTRONOMIC = {
    "--allreduce-seconds": (["--allreduce-seconds", "1e300"], "allreduce_seconds = 1e300\n"),
    "--step-seconds": (["--step-seconds", "1e300"], "step_seconds = 1e300\n"),
}


@pytest.mark.parametrize("option", sorted(ASTRONOMIC))
def test_compare_names_the_option_or_key_that_makes_the_run_astronomic(tmp_path, option):
    """``--allreduce-seconds 1e300`` said the run needs 5.56e+299 failure events and advised lowering the cycles."""
    arguments, text = ASTRONOMIC[option]
    line = error_line(cli("compare", "-N", 12, "--failures-per-1000-node-days", 5, *FAST, *arguments), 1)
    assert f"{option} = 1e+300 s makes T0" in line and line.endswith(f"lower {option}"), line
    assert "--cycles" not in line and "_seconds" not in line, line
    path = tmp_path / "c.toml"
    path.write_text(f"groups = 12\n{text}[failures]\nfailures_per_1000_node_days = 5\n")
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    key = option[2:].replace("-", "_")
    assert line.startswith(f"Error: {path}: ") and f"{key} = 1e+300 s makes T0" in line, line
    assert line.endswith(f"lower {key}"), line


def test_compare_names_the_failure_rate_that_makes_the_run_astronomic(tmp_path):
    line = error_line(cli("compare", "-N", 12, *FAST, "--failures-per-1000-node-days", "1e250"), 1)
    assert "the failures of --failures-per-1000-node-days = 1e+250, one every" in line, line
    path = tmp_path / "c.toml"
    path.write_text("groups = 12\n[failures]\nnode_mtbf_hours = 1e-300\n")
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    assert line.startswith(f"Error: {path}: ") and "the failures of [failures] node_mtbf_hours = 1e-300" in line, line


@pytest.mark.parametrize("arguments, named", [
    (["--allreduce-seconds", "1e300"], "--allreduce-seconds = 1e+300 s"),
    (["--step-seconds", "1e300"], "--step-seconds = 1e+300 s"),
    (["--set", "allreduce_seconds=1e300"], "allreduce_seconds = 1e+300 s"),
    (["--set", "max_wall_factor=1e290"], "max_wall_factor = 1e+290"),
    (["--set", "system_mtbf_seconds=1e-290"], "system_mtbf_seconds = 1e-290 s between failures"),
])
def test_simulate_names_the_option_or_field_that_makes_the_run_astronomic(arguments, named):
    """simulate named its simulation fields (and advised lowering max_wall_factor, steps or the step time)."""
    line = error_line(cli("simulate", "-N", 12, "--strategy", "spare", "--redundancy", 3, "--seeds", 1, "-q",
                          *arguments), 1)
    assert named in line, line


def test_tune_names_its_own_option():
    line = error_line(cli("tune", "-N", 12, "--seeds", 1, "-q", "--step-seconds", "1e300"), 1)
    assert "--step-seconds = 1e+300 s makes T0" in line and line.endswith("lower --step-seconds"), line


def test_the_library_names_the_field_and_its_value():
    params = so.SimulationParameters(groups=12, allreduce_seconds=1e300)
    with pytest.raises(ParameterError, match=r"allreduce_seconds = 1e\+300 s makes T0 .* lower allreduce_seconds$"):
        so.simulate(params, "spare", 3, seed=0)
    from spare_opt.simulation.parameters import astronomic_input

    assert astronomic_input(so.SimulationParameters(groups=12, steps=10**9), 1e6, "system_mtbf_seconds") \
        .endswith("lower steps")
    assert "bunches the failures" in astronomic_input(so.SimulationParameters(groups=12, weibull_shape=0.05), 300,
                                                      "system_mtbf_seconds", shape=True)


# ------------------------------------------------------------------ 3 a cluster file's byte-order mark
def test_a_cluster_file_with_a_byte_order_mark_is_refused_naming_it(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbfgroups = 12\n[failures]\nfailures_per_1000_node_days = 5\n")
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    assert line.startswith(f"Error: {path}: ") and "byte-order mark (BOM" in line and "Invalid statement" not in line
    with pytest.raises(ParameterError, match="byte-order mark"):
        so.load_cluster(path)
