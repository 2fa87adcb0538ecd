"""The main job on a built-in default: a Sidon layout for the traced cluster and a trace replay.

``spare-opt demo`` (and :func:`run_demo`) takes ``N = 400`` DP groups (the size of the
cluster of the InfiniteHBD trace), the closed-form optimal redundancy
``r* = floor(log2 N + 0.833)`` (9), generates a Sidon layout, writes it, replays a
fault trace on it and writes the replay report.  The trace is, in this order:

* the one given (``trace_path``), or ``$SPARE_TRACE`` when it names a file;
* the real InfiniteHBD trace shipped in the package (``spare_opt/data/infinitehbd/``,
  Apache-2.0, source named in ``SOURCE.md`` beside it);
* with ``generated=True``, a generated trace of the same cluster
  (:func:`default_trace_document`, the file ``instances/failures-N400-seed0.json``).

It ends with the operator's verdict (:func:`spare_opt.compare`) on that trace:
checkpointing alone, replication and SPARe on the same failures, at the trace's own
rate and compressed (:data:`DEMO_COMPRESSION`), on a reduced grid
(:data:`DEMO_VERDICT`) so that the demo stays short.  With ``micro_batches=M > 1`` it
also replays the trace with repairs at ``m = 1`` and at ``m = M`` side by side.
"""

import os
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ._core import validation as check
from ._core.results import Result
from ._core.io import as_path, dumps_json, write_atomic
from ._core.errors import LayoutFileError, OutputExistsError, OutputWriteError, ParameterError, SpareError
from .traces.json_format import parse_fault_events, read_fault_trace
from .traces.synthetic import synthetic_fault_trace

__all__ = [
    "DEMO_GROUPS",
    "DEMO_VERDICT",
    "DEMO_COMPRESSION",
    "DEMO_MICRO_BATCHES",
    "DEFAULT_OUT",
    "DEFAULT_TRACE_SEED",
    "DemoResult",
    "run_demo",
    "find_trace",
    "packaged_trace_path",
    "packaged_trace_info",
    "default_trace_document",
]

#: Size of the traced cluster (InfiniteHBD: 400 GPU servers), one node per DP group.
DEMO_GROUPS = 400
#: Default output folder of the demo (relative to the current folder).
DEFAULT_OUT = "spare-demo"
#: Seed of the generated failure sequence (``generated=True``).
DEFAULT_TRACE_SEED = 0
#: Seed of the random node placement replayed for comparison.
PLACEMENT_SEED = 0
#: Time limit of the Sidon search (seconds); r(r-1) = 72 << N - 1 = 399, so it is found at once.
SIDON_TIME_LIMIT = 5.0
#: The demo's verdict: a reduced grid of :func:`spare_opt.compare` (the full one is ``spare-opt compare``).
DEMO_VERDICT = {"rep_redundancies": (2,), "spare_redundancies": (9,), "seeds": 3,
                "period_factors": (0.5, 1.0, 2.0), "cycles": 2}
#: Trace time multiplier of the demo's second verdict: the trace 100 times faster (the paper's regime).
DEMO_COMPRESSION = 0.01
#: Micro-batches per shard type of the demo's verdict: whole shards beside micro-batches.
DEMO_MICRO_BATCHES = (1, 16)


@dataclass(eq=False)
class DemoResult(Result):
    """What :func:`run_demo` did.

    Attributes
    ----------
    layout : Layout
        The generated layout.
    layout_info : dict
        ``method``, ``groups``, ``redundancy``, ``lambda``, ``status`` (the solver's
        verdict), ``seconds`` (generation time), ``metadata``.
    trace_info : dict
        ``kind`` (``"real"`` or ``"generated"``), ``path``, and the trace's summary.
    replay : ReplayResult
        The replay of the trace on the layout.
    random_placement : ReplayResult
        The same replay with the nodes placed on random groups (seed 0) instead of
        in order of first fault: how much the placement rule matters.
    files : dict
        ``{"layout": path, "report": path}`` of the files written.
    notes : list of str
        Where the trace was looked for and why a candidate was not used.
    verdicts : list of CompareResult
        The verdict at the trace's rate, then compressed (empty without ``verdict``).
    micro_replays : list of ReplayResult
        With ``micro_batches = M > 1``: the replay with repairs at ``m = 1`` and at ``m = M``.
    """

    layout: object
    layout_info: dict
    trace_info: dict
    replay: object
    random_placement: object
    files: dict
    notes: list = field(default_factory=list)
    verdicts: list = field(default_factory=list)
    micro_replays: list = field(default_factory=list)

    def to_dict(self):
        """dict: the demo summary (layout, trace, replay summary, files, notes), JSON-ready."""
        return {
            "layout": self.layout_info,
            "trace": self.trace_info,
            "replay": self.replay.to_dict(rows=False),
            "random_placement": _placement_digest(self.random_placement),
            "files": {key: str(path) for key, path in self.files.items()},
            "notes": list(self.notes),
            "micro_batches": [_micro_digest(replay) for replay in self.micro_replays],
            "verdicts": [_verdict_digest(verdict) for verdict in self.verdicts],
        }

    def format_text(self):
        """A readable multi-line summary ending with the paths of the files written."""
        info = self.layout_info
        lines = [
            f"Layout: {info['method']}, N = {info['groups']}, r = {info['redundancy']} "
            f"(r* = floor(log2 N + 0.833)), lambda = {info['lambda']}, solver status: {info['status']}, "
            f"generated in {info['seconds']:.2f} s" + (f" ({info['reason']})" if info.get("reason") else ""),
            f"Trace: {self.trace_info['kind']} - {self.trace_info['path']}",
        ]
        lines += [f"  note: {note}" for note in self.notes]
        lines.append(self.replay.format_text())
        other = _placement_digest(self.random_placement)
        lines.append(
            f"Same trace, nodes placed on random groups (seed {PLACEMENT_SEED}): {other['wipe_outs']} wipe-out(s), "
            f"{other['masked']} masked, max S = {other['max_stack_number']}, mean S = {other['mean_stack_number']:.4f}"
        )
        if self.micro_replays:
            one, many = (_micro_digest(replay) for replay in self.micro_replays)
            lines.append(
                f"With repairs (a fault_end brings its group back), same layout: m = 1: mean step cost "
                f"{one['mean_step_cost']:.4f}, max {one['max_step_cost']:g}; m = {many['micro_batches']}: mean step "
                f"cost {many['mean_step_cost']:.4f}, max {many['max_step_cost']:g} (the work of a lost group spread "
                f"in 1/{many['micro_batches']} shards)"
            )
        lines.append(f"Wrote {self.files['layout']} (layout) and {self.files['report']} (replay report)")
        if self.verdicts:
            lines += ["", _VERDICT_LEGEND]
        for verdict in self.verdicts:
            lines.append("")
            lines.append(_verdict_lines(verdict))
        return "\n".join(lines)


def packaged_trace_path():
    """The real InfiniteHBD fault trace shipped inside the package (``spare_opt/data/infinitehbd/``).

    Returns
    -------
    pathlib.Path
        Path of ``fault_trace.json`` (Apache-2.0; ``SOURCE.md`` beside it names the
        source, ``LICENSE`` holds the license).
    """
    return Path(str(resources.files("spare_opt").joinpath("data", "infinitehbd", "fault_trace.json")))


def packaged_trace_info():
    """Where the shipped InfiniteHBD trace and its license and source note are, and what it holds.

    Returns
    -------
    dict
        ``trace``, ``license`` and ``source``: absolute paths (str) of ``fault_trace.json``,
        its ``LICENSE`` file and the ``SOURCE.md`` note naming where it comes from;
        ``license_name`` (``"Apache-2.0"``), ``reference`` (the paper that published it),
        ``repository`` and ``commit`` (the public repository and commit it was copied from),
        and the trace's size as published: ``nodes`` (400 servers), ``days`` (349),
        ``faults`` (584) and ``failing_nodes`` (231).

    Notes
    -----
    ``spare-opt data`` prints ``trace`` (``--json``: this dictionary), so that examples
    work from any folder: ``T=$(spare-opt data)``.  The file format and the trace's
    provenance are described in ``docs/model.md`` ("The shipped trace") and
    ``docs/formats.md``.

    References
    ----------
    Shou et al., "InfiniteHBD: Building Datacenter-Scale High-Bandwidth Domain for LLM with
    Optical Circuit Switching Transceivers", arXiv:2502.03885; public repository
    ``stepfun-ai/InfiniteHBD-Trace``.
    """
    trace = packaged_trace_path()
    return {
        "trace": str(trace),
        "license": str(trace.with_name("LICENSE")),
        "source": str(trace.with_name("SOURCE.md")),
        "license_name": "Apache-2.0",
        "reference": "Shou et al., \"InfiniteHBD: Building Datacenter-Scale High-Bandwidth Domain for LLM with "
                     "Optical Circuit Switching Transceivers\", arXiv:2502.03885",
        "repository": "stepfun-ai/InfiniteHBD-Trace",
        "commit": "7aacdc8c3d2352c5b784bc0ea31756e1620daed1",
        "nodes": DEMO_GROUPS,
        "days": 349,
        "faults": 584,
        "failing_nodes": 231,
    }


def find_trace(environ=None):
    """The trace the demo replays when none is given: ``$SPARE_TRACE``, else the packaged real trace.

    Parameters
    ----------
    environ : mapping, optional
        Environment (default: ``os.environ``).

    Returns
    -------
    path : pathlib.Path
    notes : list of str
        One line when ``$SPARE_TRACE`` is set but is not a file.
    """
    environ = os.environ if environ is None else environ
    notes = []
    if environ.get("SPARE_TRACE"):
        path = Path(environ["SPARE_TRACE"])
        if path.is_file():
            return path.resolve(), notes
        notes.append(f"SPARE_TRACE={path} is not a file: replaying the packaged InfiniteHBD trace")
    return packaged_trace_path(), notes


def default_trace_document():
    """The generated failure sequence of the demo (``generated=True``), rebuilt from its seed.

    Returns
    -------
    dict
        ``synthetic_fault_trace(nodes=400, seed=0)``: a ``spare-failure-trace``
        document; ``instances/make_instances.py`` writes it to
        ``instances/failures-N400-seed0.json``.
    """
    return synthetic_fault_trace(nodes=DEMO_GROUPS, seed=DEFAULT_TRACE_SEED)


def _layout_info(layout, seconds):
    metadata = dict(layout.metadata)
    status = metadata.get("solver_status") or metadata.get("status") or "unknown"
    return {
        "method": layout.method,
        "groups": layout.groups,
        "redundancy": layout.redundancy,
        "offsets": None if layout.offsets is None else list(layout.offsets),
        "lambda": layout.overlap(),
        "status": status,
        "reason": metadata.get("reason"),
        "seconds": seconds,
        "metadata": metadata,
    }


def run_demo(out_dir=DEFAULT_OUT, *, trace_path=None, force=False, planner="controller", generated=False,
             time_limit=SIDON_TIME_LIMIT, progress=None, environ=None, format=None, time_unit=None,
             micro_batches=1, verdict=True, workers=1, executor=None, stage=None):
    """Run the demo: Sidon layout for ``N = 400``, ``r = r*``, and a fault-trace replay.

    Parameters
    ----------
    out_dir : path, default ``"spare-demo"``
        Output folder, created if needed.
    trace_path : path, optional
        Replay this trace instead of ``$SPARE_TRACE`` or the packaged real trace.
    force : bool, default False
        Overwrite existing output files.
    planner : {"controller", "exact"}, default "controller"
        Reorder engine of the replay (:func:`spare_opt.replay_trace`).
    generated : bool, default False
        Replay the generated failure sequence (:func:`default_trace_document`) instead
        of the real trace.
    time_limit : float, default 5.0
        Time limit of the Sidon search (seconds).
    progress : callable, optional
        ``progress(done, total)``, passed to :func:`spare_opt.replay_trace`.
    environ : mapping, optional
        Passed to :func:`find_trace` (tests).
    format : {"json", "csv"}, optional
        Format of the trace file (``trace_path`` or ``$SPARE_TRACE``), as for
        :func:`spare_opt.read_fault_trace`; default: from the file name.
    time_unit : {"seconds", "minutes", "hours", "days"}, optional
        Unit of the numeric times of a CSV fault log.
    micro_batches : int, default 1
        ``M``; above 1 the trace is also replayed with repairs at ``m = 1`` and at
        ``m = M`` side by side.  The verdict's SPARe grid takes ``m`` in
        :data:`DEMO_MICRO_BATCHES` and ``M``.
    verdict : bool, default True
        End with the verdict (:func:`spare_opt.compare` on the trace at its rate and
        compressed :data:`DEMO_COMPRESSION`, grid :data:`DEMO_VERDICT`).
    workers : int, default 1
        Processes of the verdict (``-1``: every CPU); the numbers do not depend on it.
    executor : concurrent.futures.Executor, optional
        Run the verdict's tasks here instead.
    stage : callable, optional
        ``stage(text)`` is called as each stage starts (layout, replays, verdict), so
        that a first run, which compiles the numba kernels, does not sit silent.

    Returns
    -------
    DemoResult

    Raises
    ------
    OutputExistsError
        An output file exists and ``force`` is false (checked before any work).
    ParameterTypeError, ParameterError
        ``out_dir`` is empty or not a path, or another argument is bad.
    OutputWriteError
        ``out_dir`` exists and is not a folder (checked before any work).
    SpareError
        The output folder cannot be created or written.
    TraceError
        ``trace_path`` cannot be read.
    ParameterError
        ``format`` or ``time_unit`` is given with ``generated=True`` (there is no
        file to read), or for the packaged JSON trace (``time_unit``).

    Notes
    -----
    Output files: ``<out_dir>/layout-sidon-N400-r9.json`` (``spare-layout`` JSON)
    and ``<out_dir>/replay-N400-r9.json`` (replay report: layout, trace and replay
    summaries and the per-event rows, plus a digest of the same replay with nodes
    placed on random groups).  ``r* = floor(log2 N + 0.833)`` is the
    closed form of Lee et al., ICML 2026, Sec. 5.
    """
    from .layouts.generators import sidon
    from .simulation.replay import replay_trace
    from .guarantees.theory import r_star

    force = check.flag("force", force)
    generated = check.flag("generated", generated)
    verdict = check.flag("verdict", verdict)
    micro_batches = check.integer("micro_batches m", micro_batches, minimum=1)
    stage = check.callback("stage", stage) or (lambda text: None)
    if generated and (format is not None or time_unit is not None):
        raise ParameterError("format and time_unit describe a trace file; the generated sequence is none")
    groups = DEMO_GROUPS
    redundancy = r_star(groups)
    out_dir = as_path(out_dir, ParameterError, "demo output folder")
    layout_path = out_dir / f"layout-sidon-N{groups}-r{redundancy}.json"
    report_path = out_dir / f"replay-N{groups}-r{redundancy}.json"
    if not force:
        for path in (layout_path, report_path):
            if path.exists():
                raise OutputExistsError(f"{path} exists already (use --force to overwrite)")
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputWriteError(f"output folder {out_dir} exists and is not a folder")

    notes = []
    if trace_path is not None:
        trace = read_fault_trace(trace_path, format=format, time_unit=time_unit)
        kind = _trace_kind(trace)
    elif generated:
        trace = parse_fault_events(default_trace_document(), source=f"<generated: seed {DEFAULT_TRACE_SEED}>")
        kind = "generated"
    else:
        found, notes = find_trace(environ=environ)
        trace = read_fault_trace(found, format=format, time_unit=time_unit)
        kind = _trace_kind(trace)

    first = " (the first run also compiles the kernels)"
    stage(f"Sidon layout N = {groups}, r = {redundancy}...")
    started = time.perf_counter()
    layout = sidon(groups, redundancy, time_limit=time_limit, seed=0)
    layout_info = _layout_info(layout, time.perf_counter() - started)

    stage(f"Replaying {trace.source}{first}...")
    result = replay_trace(layout, trace, planner=planner, progress=progress)
    random_placement = replay_trace(layout, trace, planner=planner, placement_seed=PLACEMENT_SEED)
    # With repairs, whole shards (m = 1) beside micro-batches (M, else the demo's 16).
    split = micro_batches if micro_batches > 1 else max(DEMO_MICRO_BATCHES)
    micro_replays = [replay_trace(layout, trace, planner=planner, semantics="repair", micro_batches=m)
                     for m in (1, split)]
    verdicts = []
    if verdict:
        from .simulation.verdict import compare, compare_parameters

        stage(f"Verdict: checkpointing, replication and SPARe on the trace{first}...")
        grid = dict(DEMO_VERDICT, micro_batches=tuple(sorted(set(DEMO_MICRO_BATCHES) | {micro_batches})))
        for scale in (1.0, DEMO_COMPRESSION):
            params = compare_parameters("trace-400", groups, trace=trace, time_scale=scale)
            verdicts.append(compare(params, trace=trace, semantics="repair", workers=workers,
                                    executor=executor, **grid))
    trace_info = {"kind": kind, "path": trace.source, **trace.summary()}
    trace_info.pop("source", None)

    report = {
        "format": "spare-replay-report",
        "version": 1,
        "layout": {key: value for key, value in layout_info.items() if key != "metadata"},
        "trace": trace_info,
        "replay": result.to_dict(rows=True),
        "random_placement": _placement_digest(random_placement),
        "micro_batches": [_micro_digest(replay) for replay in micro_replays],
        "verdicts": [_verdict_digest(v) for v in verdicts],
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        layout.save(layout_path, force=force)
        write_atomic(report_path, dumps_json(report, indent=1) + "\n", force=force)
    except (OSError, LayoutFileError) as exc:
        if isinstance(exc, (OutputExistsError, OutputWriteError)):
            raise
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpareError(f"cannot write the demo output in {out_dir}: {reason}") from None
    return DemoResult(
        layout=layout,
        layout_info=layout_info,
        trace_info=trace_info,
        replay=result,
        random_placement=random_placement,
        files={"layout": layout_path, "report": report_path},
        notes=notes,
        verdicts=verdicts,
        micro_replays=micro_replays,
    )


def _micro_digest(result):
    s = result.summary
    return {"micro_batches": s["micro_batches"], "semantics": s["semantics"], "mean_step_cost": s["mean_step_cost"],
            "max_step_cost": s["max_load"] / s["micro_batches"], "max_load": s["max_load"],
            "mean_stack_number": s["mean_stack_number"], "wipe_outs": s["wipe_outs"], "max_out": s["max_out"]}


def _verdict_digest(verdict):
    doc = verdict.to_dict()
    return {key: doc[key] for key in ("source", "semantics", "seeds", "cycles", "time_scale", "fault_free_seconds",
                                      "strategies")}


#: What the verdict's columns mean, printed once before the verdicts.
_VERDICT_LEGEND = (
    "The verdicts below bring repaired groups back (repair semantics), unlike the replay above (the paper's\n"
    "semantics: a failed group stays out until a global restart), so they see far fewer wipe-outs.\n"
    "TTT/T0: wall-clock time to train over the fault-free time (1 is no loss), the sum of its parts: steps\n"
    "(committed steps at their step cost; elastic: more steps for the same samples), patch (patch compute,\n"
    "shrink, controller), lost (work redone after wipe-outs), restart and saves, each over T0; restarts:\n"
    "global restarts per run; step cost: layers of work per step (1 fault-free; SPARe pays S with whole\n"
    "shards, L*/m with m micro-batches; redistribution, r = N, the counting bound ceil(m N / (N - k)) / m)."
)


def _verdict_lines(verdict):
    """The verdict in a few lines: context, one line per strategy, the conclusion."""
    from .simulation.verdict import STRATEGY_LABELS, _ratio

    scale = verdict.params.trace_time_scale
    rate = "at the trace's rate" if scale == 1.0 else f"with the trace compressed {1 / scale:g}x"
    ms = sorted({row["micro_batches"] for row in verdict.settings if row["strategy"] == "spare"})
    rs = sorted({row["redundancy"] for row in verdict.settings if row["strategy"] == "spare"})
    reps = sorted({row["redundancy"] for row in verdict.settings if row["strategy"] == "rep"})
    lines = [f"Verdict {rate} ({verdict.semantics} semantics, {verdict.seeds} node placements; reduced grid: "
             f"Rep r in {reps}, SPARe r in {rs}, m in {ms}; spare-opt compare runs the full one):"]
    # the rows hold SPARe's m = 1 (the paper's) beside its best m, and elastic with its price
    for row in verdict.strategies:
        setting = "" if row["strategy"] in ("ckpt", "elastic") else (
            " r=N" if row["strategy"] == "redistribute" else f" r={row['redundancy']}") + (
            f" m={row['micro_batches']}" if row["strategy"] in ("spare", "redistribute") else "")
        ratio = _ratio(row["ttt_ratio"], verdict.params)
        price = (f"x{row['steps_per_sample']:.3f} steps for the same samples (batch -{1 - row['mean_batch_fraction']:.2%})"
                 if row["strategy"] == "elastic" else f"step cost {row['mean_step_cost']:.3f}")
        parts = row["ttt_parts"]
        lines.append(f"  {STRATEGY_LABELS[row['strategy']] + setting:<24} TTT/T0 {ratio:>7} = steps "
                     f"{parts['steps']:.3f} + patch {parts['patch']:.3f} + lost {parts['lost']:.3f} + restart "
                     f"{parts['restart']:.3f} + saves {parts['saves']:.3f}  restarts {row['restarts']:.0f}  {price}")
    lines.append("  " + verdict.conclusion())
    return "\n".join(lines)


def _trace_kind(trace):
    """``"real"`` for InfiniteHBD files and CSV fault logs (logs of a cluster), ``"generated"`` otherwise."""
    return "generated" if trace.format == "spare-failure-trace" else "real"


def _placement_digest(result):
    keys = ("placement", "wipe_outs", "wipe_out_days", "masked", "max_stack_number", "mean_stack_number", "total_moves")
    return {key: result.summary[key] for key in keys}
