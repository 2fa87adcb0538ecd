"""`spare-opt tune`: the best r and checkpoint period for replication and SPARe, the paper's table."""

import click

from spare_opt._core.plotting import require_matplotlib
from spare_opt.simulation.parameters import PAPER_TABLE, PRESETS, parse_overrides
from spare_opt.simulation.tuning import plot_tune, tune_preset

from .options import (
    FloatRange,
    IntegerRange,
    cluster_option,
    cluster_overrides,
    check_output_path,
    given,
    input_spelling,
    named_as_given,
    refuse_overflowing_time,
    refuse_unused,
    warn_ignored,
    echo_json,
    executor_for,
    force_option,
    json_option,
    progress_bar,
    quiet_option,
    scheduler_option,
    workers_option,
)

__all__ = ["command"]


@click.command("tune")
@click.option("--preset", default="paper-600k", show_default=True, type=click.Choice(sorted(PRESETS)),
              help="Built-in setting; its r sweep and checkpoint-period grid are used.")
@click.option("--groups", "-N", type=IntegerRange(min=1), default=None,
              help="One N, any (default: every N of the preset); the preset's system MTBF is kept.")
@click.option("--seeds", type=IntegerRange(min=1), default=10, show_default=True,
              help="Runs per configuration (seeds 0..K-1, the same for every configuration).")
@workers_option
@scheduler_option
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Change a simulation parameter, e.g. --set failure_model=system-renewal (repeatable).")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), multiple=True, metavar="M",
              help="SPARe's micro-batches per shard type (docs/fractional.md); repeat for several M: one row "
                   "per N and M, replication run once per N (default: 1, the paper's model).")
@click.option("--restart-seconds", type=FloatRange(min=0), default=None, metavar="SEC",
              help="Global restart time T_r (default: the preset's).")
@click.option("--save-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Checkpoint save time T_s (default: the preset's).")
@click.option("--step-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Compute of one fault-free step, one stack layer (default: the preset's).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write the figure of TTT/T0 against r (needs matplotlib).")
@cluster_option
@json_option
@force_option
@quiet_option
@click.pass_context
def command(ctx, preset, groups, seeds, workers, scheduler, settings, micro_batches, restart_seconds, save_seconds,
            step_seconds, plot_path, as_json, force, quiet):
    """Tune r and the checkpoint period by simulation: Rep+CKPT against SPARe+CKPT.

    For each N, every r of the preset's sweep runs at seven checkpoint periods around
    the Young/Daly optimum and --seeds seeds; the best (lowest mean TTT/T0) of each
    strategy is reported with its availability and the gain of SPARe, laid out like
    the paper's table (with the paper's figures beside ours for paper-600k).
    --json prints one object per N with the keys rep, spare, ckpt (each with
    best_ttt_ratio, best_r, availability, curve...), gain and closed_form; with a
    single --groups and --micro-batches the object itself, otherwise {"preset",
    "results": [...]}.  With --micro-batches M the table has a column M and the mean
    step cost of SPARe's best configuration (layers per executed step).
    """
    overrides = parse_overrides(settings)
    if "trace_time_scale" in overrides:
        refuse_unused("--set trace_time_scale", "does nothing in tune, which draws Weibull failures (no trace)")
    if force and plot_path is None:
        warn_ignored("--force", "there is no output file to overwrite without --plot")
    if given(ctx, "workers") and scheduler not in (None, "local"):
        warn_ignored("--workers", "the Dask scheduler's workers run the tasks (--workers sizes only "
                                  "--scheduler local)")
    if plot_path is not None:
        check_output_path(plot_path, force)
        require_matplotlib()  # before the long work, not after it
    for field, value, option in (("restart_seconds", restart_seconds, "--restart-seconds"),
                                 ("save_seconds", save_seconds, "--save-seconds"),
                                 ("layer_compute_seconds", step_seconds, "--step-seconds")):
        if value is not None:
            if field in overrides:
                if input_spelling(ctx, option)[1] is not None:
                    continue  # the cluster file's value: a --set on the command line wins over the file
                refuse_unused(f"--set {field}", f"and {option} give the same setting; use {option}")
            overrides[field] = value
    overrides = cluster_overrides(ctx, overrides)
    refuse_overflowing_time(ctx, preset, steps=overrides.get("steps"), step_seconds=None
                            if "layer_compute_seconds" in parse_overrides(settings) else step_seconds,
                            allreduce_seconds=overrides.get("allreduce_seconds"),
                            wall_factor=overrides.get("max_wall_factor"), steps_option="--set steps",
                            allreduce_options=("--set allreduce_seconds",))
    overrides.pop("heal_seconds", None)  # a cluster file's heal time: tune draws Weibull failures, no repairs
    own = {"layer_compute_seconds": "--step-seconds", "restart_seconds": "--restart-seconds",
           "save_seconds": "--save-seconds"}
    with executor_for(scheduler, workers) as executor, progress_bar(quiet, "simulating") as progress, \
            named_as_given(ctx, own, keep=parse_overrides(settings)):
        results = tune_preset(preset, groups=groups, seeds=seeds, micro_batches=list(micro_batches or (1,)),
                              workers=workers, executor=executor, progress=progress, **overrides)
    if plot_path is not None:
        written = plot_tune(results, plot_path, force=force,
                            title=f"{preset}: best TTT/T0 over T_c, mean of {seeds} seeds, 95% CI")
    if as_json:
        objects = [result.to_dict() for result in results]
        echo_json(objects[0] if groups is not None and len(objects) == 1 else {"preset": preset, "results": objects})
    else:
        click.echo(format_table(results, preset, show_paper=not overrides))
        if groups is not None and groups not in PRESETS[preset].groups:
            click.echo(f"N = {groups} is not one of preset {preset}'s sizes: its timings and system MTBF "
                       f"({results[0].params.system_mtbf_seconds / 60:g} min for the whole cluster) are used at N = "
                       f"{groups}")
    if plot_path is not None:
        click.echo(f"figure written to {written}", err=as_json)


def format_table(results, preset, show_paper=True):
    """The paper's table layout: one row per N (ours, then the paper's for paper-600k unchanged by --set).

    With micro-batches (some ``m > 1``) every row also gives ``m`` and the mean step
    cost of SPARe's best configuration, and the paper's rows follow the ``m = 1`` row.
    """
    micro = any(result.micro_batches > 1 for result in results)
    header = (f"{'N':>5}  {'Rep+CKPT TTT/T0':>15}  {'Rep r':>5}  {'Rep avail':>9}  "
              f"{'SPARe TTT/T0':>12}  {'SPARe r':>7}  {'SPARe avail':>11}  {'gain':>6}")
    if micro:
        header = f"{'N':>5}  {'M':>3}" + header[5:] + f"  {'SPARe cost':>10}"
    lines = [header, "-" * len(header)]
    for result in results:
        rep, spare = result.strategies["rep"], result.strategies["spare"]
        row = (f"{result.groups:>5}  {rep['best_ttt_ratio']:>15.2f}  {rep['best_r']:>5d}  {rep['availability']:>9.2%}  "
               f"{spare['best_ttt_ratio']:>12.2f}  {spare['best_r']:>7d}  {spare['availability']:>11.2%}  "
               f"{result.gain:>6.1%}")
        if micro:
            row = f"{result.groups:>5}  {result.micro_batches:>3d}" + row[5:] + f"  {spare['mean_step_cost']:>10.3f}"
        lines.append(row)
        paper = PAPER_TABLE.get(result.groups) if preset == "paper-600k" and show_paper else None
        if result.micro_batches > 1:
            paper = None
        if paper:
            paper_row = (f"{'paper':>5}  {paper['rep']:>15.2f}  {paper['rep_r']:>5d}  {paper['rep_availability']:>9.2%}  "
                         f"{paper['spare']:>12.2f}  {paper['spare_r']:>7d}  {paper['spare_availability']:>11.2%}  "
                         f"{paper['gain']:>6.1%}")
            lines.append(f"{'paper':>5}  {'':>3}" + paper_row[5:] if micro else paper_row)
    lines.append("")
    for result in results:
        ckpt = result.strategies.get("ckpt")
        closed = result.closed_form
        extra = ""
        if ckpt is not None:
            if ckpt["unfinished"]:
                extra = (f"; CKPT only: {ckpt['unfinished']} of {result.seeds} runs unfinished "
                         f"(TTT/T0 > {result.params.max_wall_factor:.0f})")
            else:
                extra = f"; CKPT only: TTT/T0 {ckpt['best_ttt_ratio']:.2f}"
        rep, spare = result.strategies["rep"], result.strategies["spare"]
        if spare["best_ttt_ci_note"] is None:
            interval = (f"95% CI of SPARe TTT/T0 {spare['best_ttt_ci95'][0]:.2f}.."
                        f"{spare['best_ttt_ci95'][1]:.2f}")
        else:  # one seed (or too few for an interval within the bounds): say so, never "nan..nan"
            interval = f"SPARe TTT/T0: {spare['best_ttt_ci_note']}"
        where = f"N={result.groups}" + (f", M={result.micro_batches}" if micro else "")
        lines.append(
            f"{where}: best T_c Rep {rep['best_period_seconds']:.0f} s, SPARe "
            f"{spare['best_period_seconds']:.0f} s ({interval}); closed form r* = {closed['r_star']}, "
            f"T_c* = {closed['period_seconds']:.0f} s{extra}"
        )
    return "\n".join(lines)
