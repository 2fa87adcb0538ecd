"""Options, parameter types and helpers shared by the ``spare-opt`` commands."""

import contextlib
import math
import os
import sys

import click
from click.core import ParameterSource

from spare_opt import MAX_MICRO_BATCHES, MAX_SPLIT_ENTRIES, Layout
from spare_opt._core import validation as check
from spare_opt._core.io import dumps_json
from spare_opt._core.parallel import check_scheduler_address, dask_executor
from spare_opt._core.errors import FailureSetError, SpareError
from spare_opt.planning.failure_sets import parse_group_ids
from spare_opt.traces.csv_format import TIME_UNITS
from spare_opt.traces.json_format import TRACE_FILE_FORMATS

__all__ = [
    "json_option",
    "force_option",
    "seed_option",
    "quiet_option",
    "layout_argument",
    "OutputExists",
    "OutputUnwritable",
    "echo_json",
    "parse_group_list",
    "check_output_path",
    "progress_enabled",
    "progress_bar",
    "workers_option",
    "scheduler_option",
    "micro_batches_option",
    "layout_micro_batches",
    "LAYOUT_M_DEFAULT",
    "micro_batches_list_option",
    "executor_for",
    "INTEGER",
    "FLOAT",
    "IntegerRange",
    "FloatRange",
    "given",
    "warn_ignored",
    "refuse_unused",
    "refuse_inputs",
    "refuse_overflowing_time",
    "input_spelling",
    "trace_format_option",
    "time_unit_option",
    "load_topology",
    "topology_option",
    "global_batch_option",
    "micro_batch_overhead_option",
    "allreduce_option",
    "window_option",
    "cluster_option",
    "cluster_overrides",
    "cluster_failure_sources",
    "warn_unused_trace_keys",
    "deprecated_alias",
]


# ------------------------------------------------------------------ number types
class _Strict:
    """Mixin: read the option's text with the library's one parser of written numbers.

    click's own ``int`` and ``float`` types call Python's ``int()`` and ``float()``,
    which take ``1_000``, other scripts' digits, ``nan`` and ``inf``, and fail with a
    bare ``ValueError`` on integers beyond 4300 digits; every number option of
    spare-opt goes through :func:`spare_opt._core.validation.parse_int` /
    :func:`~spare_opt._core.validation.parse_float` instead, as ``--fail`` and ``--set`` do.
    """

    def _parse(self, value, param, ctx):
        if not isinstance(value, str):
            return value  # a default, already a number
        try:
            return self._parser(value, None)
        except SpareError as exc:
            self.fail(str(exc), param, ctx)

    def _check_range(self, value, param, ctx):
        low, high = getattr(self, "min", None), getattr(self, "max", None)
        below = low is not None and (value <= low if getattr(self, "min_open", False) else value < low)
        above = high is not None and (value >= high if getattr(self, "max_open", False) else value > high)
        if below or above:
            shown = check.int_text(value) if isinstance(value, int) else f"{value:g}"
            self.fail(f"{shown} is not in the range {self._describe_range()}.", param, ctx)
        return value


class _StrictInt(_Strict, click.types.IntParamType):
    _parser = staticmethod(check.parse_int)

    def convert(self, value, param, ctx):
        return self._parse(value, param, ctx)


class _StrictFloat(_Strict, click.types.FloatParamType):
    _parser = staticmethod(check.parse_float)

    def convert(self, value, param, ctx):
        return float(self._parse(value, param, ctx))


class IntegerRange(_Strict, click.IntRange):
    """``click.IntRange`` read by the strict parser (help shows the range as click does)."""

    _parser = staticmethod(check.parse_int)

    def convert(self, value, param, ctx):
        return self._check_range(self._parse(value, param, ctx), param, ctx)


class FloatRange(_Strict, click.FloatRange):
    """``click.FloatRange`` read by the strict parser: finite decimal numbers only."""

    _parser = staticmethod(check.parse_float)

    def convert(self, value, param, ctx):
        return self._check_range(float(self._parse(value, param, ctx)), param, ctx)


#: Strict integer and float types for options without a range.
INTEGER = _StrictInt()
FLOAT = _StrictFloat()


# ------------------------------------------------------------ options that do nothing
def given(ctx, name):
    """Whether the option ``name`` was given (on the command line, by an old spelling, or the environment).

    Not when it is defaulted, nor when it comes from a ``--cluster`` file (a file describes
    the cluster for every command; a key one command does not use is not a mistake).
    """
    if name in ctx.meta.get("given_aliases", ()):
        return True
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def warn_ignored(option, reason):
    """Say on stderr that ``option`` is ignored (for options that only change how or where the work runs)."""
    click.echo(f"Warning: {option} is ignored: {reason}", err=True)


def refuse_unused(option, reason):
    """Refuse ``option`` as a usage error (for options that describe the experiment but would do nothing)."""
    raise click.UsageError(f"{option} {reason}")


def input_spelling(ctx, option):
    """How the user gave ``option`` (``"--node-mtbf-hours"``): ``(spelling, cluster file or None)``.

    A value that came from a ``--cluster`` file is named by the file's key
    (``"[failures] node_mtbf_hours"``) with the file, so that an error names what
    the user wrote, not an option never typed; otherwise the option itself.
    """
    path, from_file = ctx.meta.get("cluster_file", (None, {}))
    name = _parameter_of(ctx, option)
    if name in from_file and ctx.get_parameter_source(name) == ParameterSource.DEFAULT_MAP:
        return _file_key(from_file[name]), path
    return option, None


def refuse_inputs(ctx, message, *options):
    """Refuse inputs that do not go together, each named as the user gave it.

    ``message`` is a :meth:`str.format` template whose ``{}`` take the ``options``
    (``"--gradient-bytes"``) in order.  Options given on the command line keep their
    spelling and the refusal is a usage error (exit 2), word for word as
    :func:`refuse_unused` says it.  When any of them came from a ``--cluster`` file,
    the message starts with the file, names its keys (``[failures] node_mtbf_hours``),
    names the options not given at all by their keys too, and exits 1 (as the file's
    other errors do).
    """
    spelled = [input_spelling(ctx, option) for option in options]
    files = [path for _, path in spelled if path is not None]
    if not files:
        raise click.UsageError(message.format(*options))
    names = [spelling if path is not None or given(ctx, _parameter_of(ctx, option) or "") else _file_key(
        option[2:].replace("-", "_")) for option, (spelling, path) in zip(options, spelled)]
    raise click.ClickException(f"{files[0]}: " + message.format(*names))


def in_input_terms(ctx, message, own_options, keep=()):
    """``message`` with the simulation fields of ``own_options`` named as the user gave them.

    ``own_options`` maps fields to this command's options (``{"allreduce_seconds":
    "--allreduce-seconds"}``).  Only fields whose name cannot be an English word
    (``max_wall_factor``, not ``steps``) are replaced: by the option, or by a
    ``--cluster`` file's key when the value came from the file (:func:`input_spelling`;
    the message then starts with the file).  Fields in ``keep`` (given as ``--set
    FIELD=VALUE``: the user wrote the field) stay.
    """
    import re

    spelled = {field: input_spelling(ctx, option) for field, option in own_options.items()
               if "_" in field and field not in keep}
    if not spelled:
        return message
    pattern = re.compile(r"\b(%s)\b" % "|".join(spelled))
    # A value from a --cluster file is named by its key, and the message starts with the file (as its other errors).
    files = [str(spelled[name][1]) for name in pattern.findall(message) if spelled[name][1] is not None]
    message = pattern.sub(lambda match: spelled[match.group(1)][0], message)
    if files and not message.startswith(files[0]):
        message = f"{files[0]}: {message}"
    return message


@contextlib.contextmanager
def named_as_given(ctx, own_options, keep=()):
    """Re-raise the library's errors inside the block with its field names as the user gave them.

    A :class:`spare_opt.SpareError` becomes a one-line ``click.ClickException`` whose
    message went through :func:`in_input_terms` (``--allreduce-seconds`` for
    ``allreduce_seconds``, a cluster file's key, or the field itself when ``--set``
    gave it).
    """
    try:
        yield
    except SpareError as exc:
        raise click.ClickException(in_input_terms(ctx, str(exc), own_options, keep=keep)) from None


def refuse_overflowing_time(ctx, preset, *, steps=None, step_seconds=None, allreduce_seconds=None, wall_factor=None,
                            steps_option="--steps", allreduce_options=("--allreduce-seconds",)):
    """Refuse a fault-free time ``T0 = steps x (step + all-reduce)`` that overflows, or the runs' wall-time cap.

    Named by the options (or cluster-file keys) that set it, not by the simulation's
    field names; values not given are the preset's.  ``allreduce_options`` name the
    source of ``allreduce_seconds`` (the ring model's options when it gave the time).
    """
    from spare_opt.simulation.parameters import preset_parameters

    base = preset_parameters(preset, 1)
    steps_used = base.steps if steps is None else steps
    step_used = base.layer_compute_seconds if step_seconds is None else step_seconds
    allreduce_used = 0.0 if allreduce_seconds is None else allreduce_seconds
    if math.isfinite(steps_used * (step_used + allreduce_used) * max(wall_factor or 0.0, base.max_wall_factor)):
        return
    named = [option for option, value in ((steps_option, steps), ("--step-seconds", step_seconds)) if value is not None]
    if allreduce_seconds is not None:
        named += list(allreduce_options)
    named = named or [steps_option]
    refuse_inputs(ctx, " and ".join(["{}"] * len(named)) + ": the fault-free time steps x (step + all-reduce) = "
                  f"{steps_used:g} x ({step_used:g} s + {allreduce_used:g} s), and the runs' wall-time cap, overflow "
                  f"in seconds: lower {'them' if len(named) > 1 else 'it'}", *named)


def _parameter_of(ctx, option):
    """The parameter name of ``option`` (``"--groups"`` -> ``"groups"``) in this command, or None."""
    for param in ctx.command.params:
        if option in getattr(param, "opts", ()):
            return param.name
    return None


def _file_key(key):
    """A cluster-file key as the file spells it: ``[failures] node_mtbf_hours``, ``gradient_bytes``."""
    from spare_opt.simulation.cluster import FAILURE_KEYS

    return f"[failures] {key}" if key in FAILURE_KEYS else key


class OutputExists(click.FileError):
    """Refusal to overwrite an existing output file (exit code 1).

    Worded like the library's :class:`spare_opt.OutputExistsError`, so every command
    refuses the same way whether the check comes before or after the work.
    """

    def __init__(self, filename):
        super().__init__(filename, hint="exists already (use --force to overwrite)")

    def format_message(self):
        return f"{self.ui_filename} {self.message}"


class OutputUnwritable(click.FileError):
    """An output path that cannot be written (exit code 1, message from click)."""

    def __init__(self, filename, hint):
        super().__init__(filename, hint=hint)


def check_output_path(path, force):
    """Fail early, before long work, on an output path that the final write would refuse.

    Raises :class:`OutputExists` when ``path`` exists and ``force`` is not set, and
    :class:`OutputUnwritable` when ``path`` is empty, is a folder, or its folder does
    not exist (so that a long solve is not thrown away at the end).
    """
    if path is None:
        return
    text = os.fspath(path)
    if not str(text).strip():
        raise OutputUnwritable(str(text), "the file name is empty")
    if os.path.isdir(text):
        raise OutputUnwritable(str(text), "it is a folder")
    # Only a regular file is "overwritten"; /dev/null, a FIFO... are written through.
    if os.path.isfile(text) and not force:
        raise OutputExists(str(path))
    folder = os.path.dirname(text) or "."
    if not os.path.isdir(folder):
        raise OutputUnwritable(str(text), f"folder {folder} does not exist" if not os.path.exists(folder)
                               else f"{folder} is not a folder")


def _load_layout(ctx, param, value):
    if value is None:
        return None
    # A missing or broken layout file is not a usage mistake: report it as one
    # "Error:" line (exit 1) rather than click's usage block.
    try:
        return Layout.load(value)
    except SpareError as exc:
        raise click.ClickException(str(exc)) from None


def load_topology(ctx, param, value):
    """``--topology FILE`` callback: the file loaded into a :class:`spare_opt.Topology` (one Error line if bad)."""
    if value is None:
        return None
    from spare_opt.layouts.topology import Topology

    try:
        return Topology.load(value)
    except SpareError as exc:
        raise click.ClickException(str(exc)) from None


def topology_option(help_text):
    """``--topology FILE``: a topology file (docs/formats.md), loaded and checked."""
    return click.option("--topology", "topology", default=None, metavar="FILE", callback=load_topology,
                        help=help_text)


def layout_argument(func):
    """``LAYOUT`` positional argument: a layout file, loaded and validated into a :class:`Layout`."""
    return click.argument("layout", metavar="LAYOUT", callback=_load_layout)(func)


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout instead of text.")
force_option = click.option("--force", is_flag=True, help="Overwrite existing output files.")
seed_option = click.option("--seed", type=INTEGER, default=0, show_default=True,
                           help="Random seed; equal seeds give equal results.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")


def echo_json(obj):
    """Print ``obj`` as indented JSON with the library's one writer (numpy converted, NaN refused)."""
    click.echo(dumps_json(obj, indent=2))


def parse_group_list(text):
    """Parse ``"3,17,42"`` into ints with :func:`spare_opt.planning.plan.parse_group_ids` (usage error on bad text)."""
    try:
        return parse_group_ids(text)
    except FailureSetError as exc:
        raise click.BadParameter(str(exc)) from None


def progress_enabled(quiet):
    """Progress bars go to stderr, only on a terminal and without ``--quiet``."""
    return not quiet and sys.stderr.isatty()




@contextlib.contextmanager
def progress_bar(quiet, label):
    """A ``progress(done, total)`` callback drawing a click progress bar on stderr, or ``None``.

    The bar appears on the first call (when the total is known), only on a terminal and
    without ``--quiet``.
    """
    if not progress_enabled(quiet):
        yield None
        return
    bar = None

    def progress(done, total):
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield progress
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


#: The default of every --micro-batches that reads a layout, as --help shows it.
LAYOUT_M_DEFAULT = "the layout's metadata.micro_batches, else 1"

micro_batches_option = click.option(
    "--micro-batches", "micro_batches", type=IntegerRange(min=1), default=None, show_default=LAYOUT_M_DEFAULT,
    metavar="M",
    help="Micro-batches per shard type (fractional stacking): the work of a failed group is spread in "
         "units of 1/M of a shard, so the step cost is L*/M instead of a whole number of layers.  1 is the "
         f"paper's model.  M <= {MAX_MICRO_BATCHES:,} and N M <= {MAX_SPLIT_ENTRIES:,}.  An M other than the "
         "layout's recommended m is used, with a warning.")


def layout_micro_batches(layout, micro_batches):
    """The m a command runs ``layout`` with (:func:`spare_opt.recommended_micro_batches`), its warning on stderr.

    ``--micro-batches`` given and different from the layout's recommended m: the given
    value, and one "Warning:" line (the library's RecommendationWarning, given once per
    layout, so the library calls that follow stay silent).
    """
    import warnings

    from spare_opt import recommended_micro_batches

    if layout is None:
        return 1 if micro_batches is None else micro_batches
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = recommended_micro_batches(layout, micro_batches)
    for warning in caught:
        click.echo(f"Warning: {warning.message}", err=True)
    return m


def _micro_batch_list(ctx, param, value):
    """``--micro-batches 1,4,8`` (or repeated) as a tuple of distinct integers ``m >= 1``, in order."""
    values = []
    for text in value:
        items = [item.strip() for item in text.split(",")]
        if any(not item for item in items):
            raise click.BadParameter(f"expected integers M >= 1 separated by commas, got {text!r}")
        for item in items:
            try:
                m = check.parse_int(item, None)
            except SpareError as exc:
                raise click.BadParameter(str(exc)) from None
            if m < 1:
                raise click.BadParameter(f"{check.int_text(m)} is not a number of micro-batches (M >= 1)")
            values.append(m)
    return tuple(dict.fromkeys(values)) or (1,)


micro_batches_list_option = click.option(
    "--micro-batches", "micro_batches", multiple=True, callback=_micro_batch_list, metavar="M[,M...]",
    help="Micro-batches per shard type to evaluate, comma-separated or repeated (e.g. 1,4,8,16): one row per "
         "value, on the same layouts and failure orders.  1 is the paper's model  [default: 1].  "
         f"M <= {MAX_MICRO_BATCHES:,} and N M <= {MAX_SPLIT_ENTRIES:,}.")


def _workers(ctx, param, value):
    if value == 0 or value < -1:
        raise click.BadParameter(f"must be a positive integer or -1 (every CPU), got {value}")
    return value


def _scheduler(ctx, param, value):
    if value is None:
        return None
    try:
        return check_scheduler_address(value)
    except SpareError as exc:
        raise click.BadParameter(str(exc)) from None


workers_option = click.option(
    "--workers", type=INTEGER, default=1, show_default=True, metavar="W", callback=_workers,
    help="Processes on this machine (-1: every CPU; at most one per CPU); with --scheduler local, the "
         "workers of the local cluster.  Results do not depend on it.")
scheduler_option = click.option(
    "--scheduler", default=None, metavar="ADDRESS", callback=_scheduler,
    help="Run on a Dask distributed cluster: its scheduler address (tcp://host:8786), or 'local' to start "
         "a local cluster of --workers processes.  Needs the 'dask' extra; results do not depend on it "
         "(docs/scaling.md).")


@contextlib.contextmanager
def executor_for(scheduler, workers):
    """The ``concurrent.futures.Executor`` of a Dask cluster for ``--scheduler``, or ``None`` without it.

    ``"local"`` starts a ``distributed.LocalCluster`` of ``workers`` single-threaded
    worker processes (every CPU for ``-1``) and stops it afterwards; an address connects
    to a running scheduler.  The library does the work
    (:func:`spare_opt._core.parallel.dask_executor`); its errors (Dask missing, a scheduler
    that cannot be reached) become one ``Error:`` line.  See ``docs/scaling.md``.
    """
    if scheduler is None:
        yield None
        return
    with dask_executor(scheduler, workers=workers) as executor:
        yield executor


trace_format_option = click.option(
    "--format", "trace_format", type=click.Choice(TRACE_FILE_FORMATS), default=None,
    help="Format of the trace file (default: csv for a name ending in .csv, json otherwise).")
time_unit_option = click.option(
    "--time-unit", type=click.Choice(list(TIME_UNITS)), default=None,
    help="Unit of the numeric times of a CSV fault log (needed exactly when its times are numbers, "
         "not ISO-8601 timestamps).")


# ------------------------------------------------------------ batch, micro-batches, all-reduce
global_batch_option = click.option(
    "--global-batch", "global_batch", type=IntegerRange(min=1), default=None, metavar="SEQUENCES",
    help="Sequences in the global batch: a group's shard type holds floor(SEQUENCES / N) of them, so m is at most "
         "that (larger m are left out, and said so).  Default: no bound.")
micro_batch_overhead_option = click.option(
    "--micro-batch-overhead-seconds", "micro_batch_overhead_seconds", type=FloatRange(min=0), default=0.0,
    show_default=True, metavar="SEC",
    help="Fixed cost (launch, pipeline fill) of each micro-batch a group computes beyond the first of a shard "
         "type; 0 keeps the figures without it.")
allreduce_option = click.option(
    "--allreduce-seconds", "allreduce_seconds", type=FloatRange(min=0), default=None, metavar="SEC",
    help="All-reduce time per step (default: the paper's line in N, fitted on N = 200-1000; past N = 1000 "
         "simulate and tune note the extrapolated value, compare refuses it and asks for a measured time or "
         "the ring model's --gradient-bytes and --bandwidth-bytes-per-second).")
window_option = click.option(
    "--window", "window", nargs=2, type=str, default=None, metavar="START END",
    help="Observation window of the trace: days from its origin, or ISO-8601 dates (a CSV log with timestamps).  "
         "Events outside are dropped, faults open at START are taken as already down, faults open at END are "
         "right-censored; rates are per window length.")
# ------------------------------------------------------------------ the cluster file
#: Cluster-file keys that only ``compare`` reads and that decide a run's failures or its
#: all-reduce (failure rates, nodes per group, the ring model).
_COMPARE_ONLY_KEYS = ("failures_per_1000_node_days", "node_mtbf_hours", "job_mttf_hours", "job_nodes",
                      "repair_hours", "nodes_per_group", "gradient_bytes", "bandwidth_bytes_per_second",
                      "allreduce_latency_seconds")


def _load_cluster(ctx, param, value):
    """``--cluster FILE`` (eager): its keys become the defaults of the options of the same name.

    A key ``restart_seconds`` is the default of ``--restart-seconds``, a ``[failures]``
    key ``failure_model`` of ``--failure-model``; an option on the command line still
    wins (click's ``default_map``).  Keys that name a simulation parameter but no
    option of this command go to ``--set`` (:func:`cluster_overrides`); other keys the
    command does not use are named in a warning.
    """
    if value is None:
        return None
    from dataclasses import fields

    from spare_opt.simulation.cluster import load_cluster
    from spare_opt.simulation.parameters import SimulationParameters

    try:
        cluster = load_cluster(value)
    except SpareError as exc:
        raise click.ClickException(str(exc)) from None
    by_flag, params = {}, {}
    for other in ctx.command.params:
        for opt in getattr(other, "opts", ()):
            if opt.startswith("--") and not getattr(other, "hidden", False):
                by_flag[opt[2:].replace("-", "_")] = other.name
                params[other.name] = other
    defaults, pending, unused = dict(ctx.default_map or {}), {}, []
    sim_fields = {f.name for f in fields(SimulationParameters)}
    has_set = any(other.name == "settings" for other in ctx.command.params)
    from_file = {}
    for key, item in cluster.options().items():
        if key in by_flag:
            name = by_flag[key]
            default = list(item) if key == "window" else item
            # Checked here, against the option's own type, so that a bad value is blamed
            # on the file and its key, not on an option that was never given.
            try:
                params[name].type_cast_value(ctx, default)
            except click.BadParameter as exc:
                table = "[failures] " if key in cluster.failures else ""
                raise click.ClickException(f"{value}: {table}{key} = {item!r}: {exc.message}") from None
            defaults[name] = default
            from_file[name] = key
        elif key in sim_fields and has_set:
            pending[key] = item
        else:
            unused.append(key)
    ctx.default_map = defaults
    ctx.meta["cluster_overrides"] = pending
    ctx.meta["cluster_file"] = (value, from_file)
    # Keys that decide the run's failures or its all-reduce: a command that cannot read them
    # would run other numbers (a preset's failures, the paper's all-reduce) under the
    # file's name, so it refuses them rather than warn.
    deciding = [key for key in unused if key in _COMPARE_ONLY_KEYS]
    if deciding:
        raise click.ClickException(
            f"{value}: {ctx.info_name} does not take {', '.join(deciding)} (spare-opt compare does): without "
            f"them it would run other failures or another all-reduce; run compare, or give {ctx.info_name} a "
            "failure model (spare-opt fit) and the all-reduce time in a file without them")
    if unused:
        click.echo(f"Warning: {value}: {ctx.info_name} does not use {', '.join(unused)} (ignored)", err=True)
    return cluster


cluster_option = click.option(
    "--cluster", "cluster", type=click.Path(dir_okay=False), default=None, metavar="FILE", is_eager=True,
    expose_value=False, callback=_load_cluster,
    help="Cluster file (TOML, docs/cluster.md): its keys (groups, step_seconds, restart_seconds, ..., and a "
         "[failures] table) are the defaults of the options of the same name; options given here win.")


#: ``[failures]`` keys that describe the file's own trace (they go with it when it gives way).
_FILE_TRACE_KEYS = ("format", "time_unit", "time_scale", "window", "nodes")
#: A cluster file's failure sources (``[failures]`` keys), and the keys that only describe
#: a rate (a job MTTF's node count, the repairs of a rate): they give way with their source.
_FILE_SOURCE_KEYS = ("trace", "failure_model", "failures_per_1000_node_days", "node_mtbf_hours", "job_mttf_hours")
_FILE_RATE_KEYS = ("job_nodes", "repair_hours")
#: The parameters through which the command line gives a failure source.
_SOURCE_PARAMS = ("trace_path", "model_path", "fault_model_path", "failures_per_1000_node_days", "node_mtbf_hours",
                  "job_mttf_hours")


def cluster_failure_sources(ctx, **values):
    """Apply "the command line wins" to the failure source of a ``--cluster`` file.

    ``values`` maps the command's parameter names to their values (``trace_path``, the
    failure model's parameter, and the trace options such as ``trace_format``).  When the
    command line gives a failure source (``--trace``, ``--failure-model`` or a failure
    rate such as ``--node-mtbf-hours``), the file's ``[failures]`` source gives way, with
    the keys that describe it (a trace's ``format``, ``time_unit``, ``time_scale``,
    ``window``, ``nodes``; a rate's ``job_nodes`` and ``repair_hours``, except that a rate
    on the command line keeps the file's repairs, and a job MTTF its node count): they
    take their options' defaults, and a warning on stderr names them.  Returns the values as a tuple, in
    the order given (unchanged without a cluster file or when no source meets another).
    """
    path, from_file = ctx.meta.get("cluster_file", (None, {}))
    if not from_file:
        return tuple(values.values())
    file_params = {name for name in values if name in from_file
                   and ctx.get_parameter_source(name) == ParameterSource.DEFAULT_MAP}
    sources = [name for name in values if from_file.get(name) in _FILE_SOURCE_KEYS or name in _SOURCE_PARAMS]
    on_command_line = [name for name in sources if values[name] is not None and name not in file_params]
    # A rate on the command line keeps the file's repairs (a rate has none of its own), and
    # its node count when the command line's rate is a job MTTF; a trace or a model replaces both.
    by_rate = all(name in _SOURCE_PARAMS[3:] for name in on_command_line)
    kept = (("repair_hours",) if by_rate else ()) + (("job_nodes",) if "job_mttf_hours" in on_command_line else ())
    dropped = [name for name in values if name in file_params and from_file[name] not in kept
               and from_file[name] in _FILE_SOURCE_KEYS + _FILE_TRACE_KEYS + _FILE_RATE_KEYS]
    if not on_command_line or not dropped:
        return tuple(values.values())
    params = {param.name: param for param in ctx.command.params}
    for name in dropped:
        values[name] = params[name].default
    flags = " and ".join(params[name].opts[0] for name in on_command_line)
    click.echo(f"Warning: {path}: {flags} on the command line replaces the file's [failures] "
               f"{', '.join(from_file[name] for name in dropped)} (ignored)", err=True)
    return tuple(values.values())


def warn_unused_trace_keys(ctx, trace_path, **values):
    """Say on stderr which of a ``--cluster`` file's trace keys the run does not use.

    ``values`` maps parameter names (``trace_format``, ``time_unit``, ``time_scale``,
    ``window``) to the values the command got.  Without a trace, a file's ``[failures]``
    ``format``, ``time_unit``, ``time_scale`` or ``window`` describes nothing the run reads.
    A cluster file describes the cluster for every command, so such keys are not refused
    (:func:`given`), but they are not dropped silently either: one warning names them.
    Keys that :func:`cluster_failure_sources` already replaced (back to their defaults,
    with their own warning) are not named again.
    """
    path, from_file = ctx.meta.get("cluster_file", (None, {}))
    if trace_path is not None or not from_file:
        return
    params = {param.name: param for param in ctx.command.params}
    unused = [from_file[name] for name, value in values.items()
              if name in from_file and ctx.get_parameter_source(name) == ParameterSource.DEFAULT_MAP
              and value != params[name].default]
    if unused:
        click.echo(f"Warning: {path}: [failures] {', '.join(unused)} describe a trace, and the run has no trace "
                   "(ignored)", err=True)


def cluster_overrides(ctx, overrides):
    """``overrides`` (from ``--set``) with the cluster file's simulation parameters that have no option here.

    A ``--set`` of the same field wins over the file.
    """
    return {**ctx.meta.get("cluster_overrides", {}), **overrides}


# ------------------------------------------------------------------ old spellings
def deprecated_alias(old, new, name, *, type=None, convert=None, metavar=None, required=False):
    """Keep the old spelling ``old`` of option ``new`` (parameter ``name``) for a release, hidden.

    The decorated command gets the value under ``name`` (``convert`` applied, e.g.
    minutes to seconds) with a warning on stderr naming the new spelling; giving both
    spellings is a usage error.  With ``required``, one of the two spellings must be
    given (the new option is then declared without ``required``).  Apply it below
    ``@click.command`` (it wraps the callback and adds a hidden option).
    """
    import functools

    hidden_name = f"_deprecated_{name}_{old.lstrip('-').replace('-', '_')}"

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            value = kwargs.pop(hidden_name, None)
            if value is not None:
                ctx = click.get_current_context()
                if given(ctx, name):
                    raise click.UsageError(f"{old} is the old spelling of {new}: give one")
                click.echo(f"Warning: {old} is deprecated, use {new}", err=True)
                ctx.meta.setdefault("given_aliases", set()).add(name)
                kwargs[name] = convert(value) if convert is not None else value
                if isinstance(kwargs[name], float) and not math.isfinite(kwargs[name]):  # minutes x 60 overflowed
                    raise click.UsageError(f"{old}: {value:g} does not fit in the unit of {new} (it overflows)")
            elif required and kwargs.get(name) is None:
                raise click.UsageError(f"Missing option '{new.split('/')[0]}'.")
            return func(*args, **kwargs)

        return click.option(old, hidden_name, type=type, default=None, hidden=True, metavar=metavar)(wrapper)

    return decorate
