"""Input hardening, round 4: thirteen kinds of hostile or unusual input, one section each.

Same contract as ``tests/test_bad_input_round2.py``: the CLI prints one ``Error: ...``
line and exits non-zero (no traceback), the API raises the specific
:class:`spare_opt.SpareError` subclass, and where there is a right value it is checked.
Sections: 1 float products converted to integers; 2 group ids beyond int32;
3 Weibull shapes that underflow later; 4 more local workers than tasks; 5 wipe-out
pairs of overlapping domains; 6 ``--until-days`` with a domain column; 7 runs that
overshoot the wall cap; 8 malformed plans; 9 booleans and empty containers in
readers; 10 UTC offsets; 11 SIGTERM during a write; 12 options that do nothing;
13 messages that contradict themselves; then the smaller findings.
"""

import json

import pytest

from spare_opt import (
    MAX_STEPS,
    ParameterError,
    compare_parameters,
    parse_fault_csv,
    steps_in,
)
from test_bad_input_round2 import cli, error_line, write

LOG = "node,start,end\nn1,1,5\nn2,3,8\nn3,20,30\n"  # hours: the span is 30 h


@pytest.fixture
def small_log(tmp_path):
    return write(tmp_path, "log.csv", LOG)


# ============================================ 1. float products converted to int
def test_kind1_compare_steps_of_the_trace_span_are_the_rounded_quotient(small_log):
    trace = parse_fault_csv(LOG, time_unit="hours")
    params = compare_parameters(groups=4, trace=trace, time_scale=3.0)
    step = params.layer_compute_seconds + params.allreduce_seconds
    assert params.steps == max(1, round(30 * 3600 * 3.0 / step))


@pytest.mark.parametrize("scale, match", [(1e306, "overflows a float"), (1e12, "more than the 1,000,000,000")])
def test_kind1_compare_time_scale_beyond_the_step_count_is_one_line(small_log, scale, match):
    trace = parse_fault_csv(LOG, time_unit="hours")
    with pytest.raises(ParameterError, match=match):
        compare_parameters(groups=4, trace=trace, time_scale=scale)
    line = error_line(cli("compare", "--trace", small_log, "--time-unit", "hours", "--time-scale", scale, "-q"), 1)
    assert match in line


def test_kind1_steps_in_refuses_what_int_cannot_hold():
    params = compare_parameters(groups=4, steps=10)
    step = params.layer_compute_seconds + params.allreduce_seconds
    assert steps_in(step * MAX_STEPS, params) == MAX_STEPS
    for seconds in (float("inf"), step * (MAX_STEPS + 1)):
        with pytest.raises(ParameterError):
            steps_in(seconds, params)


def test_kind1_simulate_time_scale_that_overflows_is_one_line_without_warnings(small_log):
    result = cli("simulate", "--trace", small_log, "--time-unit", "hours", "--preset", "trace-400",
                 "--trace-time-scale", 1e306, "-q")
    assert "overflows a float" in error_line(result, 1)
    assert "RuntimeWarning" not in result.stderr
