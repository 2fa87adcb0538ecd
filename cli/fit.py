"""`spare-opt fit`: fit a failure model (MTBF, Weibull gaps, repairs, correlated failures) to a fault trace."""

import re

import click

from spare_opt._core.errors import SpareError
from spare_opt.traces.fit import DEFAULT_RESAMPLES, DEFAULT_WINDOW_MINUTES, MAX_RESAMPLES, fit_trace
from spare_opt.traces.failure_model import REPAIR_DISTRIBUTIONS
from spare_opt.traces.json_format import read_fault_trace

from .options import (
    FLOAT,
    FloatRange,
    IntegerRange,
    check_output_path,
    echo_json,
    force_option,
    json_option,
    seed_option,
    time_unit_option,
    trace_format_option,
    warn_ignored,
    window_option,
)

__all__ = ["command"]


@click.command("fit")
@click.argument("trace_path", metavar="TRACE")
@trace_format_option
@time_unit_option
@window_option
@click.option("--nodes", type=IntegerRange(min=1), default=None, metavar="N",
              help="Cluster size (default: the file's, else the nodes the trace names; an InfiniteHBD file "
                   "lists only nodes that failed: its cluster has 400).")
@click.option("--window-minutes", type=FloatRange(min=0), default=DEFAULT_WINDOW_MINUTES, show_default=True,
              metavar="MIN", help="Node faults starting within MIN minutes of an event's first fault join that "
                                  "failure event (0: same instant only).")
@click.option("--start-day", type=FLOAT, default=None, metavar="DAY",
              help="Start of the observation window, at or before the first event: it widens the window, it "
                   "does not cut the trace (default: day 0, or the first event if earlier).")
@click.option("--end-day", type=FLOAT, default=None, metavar="DAY",
              help="End of the observation window, at or after the last event (default: the last event); open "
                   "faults are censored there.")
@click.option("--repair-distribution", type=click.Choice(list(REPAIR_DISTRIBUTIONS)), default="empirical",
              show_default=True, help="What the failure model draws repair times from: the observed durations, "
                                      "or the lognormal fit.")
@click.option("--confidence", type=FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.95,
              show_default=True, metavar="LEVEL", help="Level of every confidence interval.")
@click.option("--resamples", type=IntegerRange(min=99, max=MAX_RESAMPLES), default=DEFAULT_RESAMPLES, show_default=True, metavar="B",
              help="Bootstrap resamples and Monte-Carlo samples of the goodness-of-fit test.")
@seed_option
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the failure model to FILE (JSON, for simulate/compare --failure-model).")
@force_option
@json_option
def command(trace_path, trace_format, time_unit, window, nodes, window_minutes, start_day, end_day, repair_distribution,
            confidence, resamples, seed, output, force, as_json):
    """Fit a failure model to the node fault trace TRACE.

    Reports, with confidence intervals where they apply: the per-node MTBF, the
    system MTBF (time between node faults in the cluster) and the time between
    failure events; the Weibull shape of the gaps between events and whether
    shape < 1 (bursts) is significant; repair times (median, mean, max, lognormal
    fit; faults open at the end are censored); how often a failure event takes
    several nodes (same instant, and within --window-minutes); the mean and peak
    number of nodes down.  -o writes the fitted failure model as JSON.
    See docs/fit.md.

    \b
    Example:
      spare-opt fit fault_trace.json --nodes 400 -o model.json
    """
    check_output_path(output, force)
    if force and output is None:
        warn_ignored("--force", "there is no output file to overwrite without --output")
    trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
    try:
        result = fit_trace(trace, nodes=nodes, window_minutes=window_minutes, start_day=start_day, end_day=end_day,
                           repair_distribution=repair_distribution, confidence=confidence, resamples=resamples,
                           seed=seed, window=window)
    except SpareError as exc:  # the library names its arguments; the operator gave options
        raise click.ClickException(re.sub(r"\b(start_day|end_day|window_minutes)\b",
                                          lambda match: "--" + match.group(1).replace("_", "-"), str(exc))) from None
    written = None
    if output is not None and result.model is not None:
        written = str(result.model.save(output, force=force))
    if as_json:
        doc = result.to_dict()
        doc["model_path"] = written
        echo_json(doc)
    else:
        click.echo(result.format_text())
        if written is not None:
            click.echo(f"\nWrote the failure model to {written}")
    if output is not None and result.model is None:
        raise SpareError(f"cannot write {output}: {result.model_error}")
