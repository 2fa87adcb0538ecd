"""The main job on a built-in default: a Sidon layout for the traced cluster and a trace replay.

``spare-opt demo`` (and :func:`run_demo`) takes ``N = 400`` DP groups (the size of the
cluster of the InfiniteHBD trace), the closed-form optimal redundancy
``r* = floor(log2 N + 0.833)`` (9), generates a Sidon layout, writes it, replays a
fault trace on it and writes the replay report:

* the real InfiniteHBD trace when it is found (``$SPARE_TRACE``, then
  ``../shared/data/infinitehbd-trace/fault_trace.json`` relative to the current
  folder, then relative to the source checkout);
* otherwise the generated failure sequence shipped in the package
  (``spare_opt/data/failures-N400-seed0.json``, also in ``instances/``), written by
  ``instances/make_instances.py`` from :func:`default_trace_document`.
"""

import json
import os
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ._io import as_path, json_default, write_atomic
from .errors import LayoutFileError, OutputExistsError, OutputWriteError, ParameterError, SpareError
from .trace import parse_fault_events, read_fault_trace, synthetic_fault_trace

__all__ = [
    "DEMO_GROUPS",
    "DEFAULT_OUT",
    "DEFAULT_TRACE_SEED",
    "DEFAULT_TRACE_NAME",
    "REAL_TRACE_RELATIVE",
    "DemoResult",
    "run_demo",
    "find_real_trace",
    "default_trace_document",
    "load_default_trace",
]

#: Size of the traced cluster (InfiniteHBD: 400 GPU servers), one node per DP group.
DEMO_GROUPS = 400
#: Default output folder of the demo (relative to the current folder).
DEFAULT_OUT = "spare-demo"
#: Seed of the generated failure sequence shipped with the package.
DEFAULT_TRACE_SEED = 0
#: File name of that sequence inside ``spare_opt/data/`` and ``instances/``.
DEFAULT_TRACE_NAME = "failures-N400-seed0.json"
#: Where the real trace sits relative to a checkout's parent layout (``<root>/../shared/...``).
REAL_TRACE_RELATIVE = Path("..") / "shared" / "data" / "infinitehbd-trace" / "fault_trace.json"
#: Folder above the package: the source checkout when it holds ``pyproject.toml``
#: (editable install); :func:`find_real_trace` checks that before using it.
_SOURCE_ROOT = Path(__file__).resolve().parent.parent
#: Seed of the random node placement replayed for comparison.
PLACEMENT_SEED = 0
#: Time limit of the Sidon search (seconds); r(r-1) = 72 << N - 1 = 399, so it is found at once.
SIDON_TIME_LIMIT = 5.0


@dataclass
class DemoResult:
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
        in order of first appearance: how much the placement rule matters.
    files : dict
        ``{"layout": path, "report": path}`` of the files written.
    notes : list of str
        Where the trace was looked for and why a candidate was not used.
    """

    layout: object
    layout_info: dict
    trace_info: dict
    replay: object
    random_placement: object
    files: dict
    notes: list = field(default_factory=list)

    def to_json(self):
        """dict: the demo summary (layout, trace, replay summary, files, notes), JSON-ready."""
        return {
            "layout": self.layout_info,
            "trace": self.trace_info,
            "replay": self.replay.to_json(rows=False),
            "random_placement": _placement_digest(self.random_placement),
            "files": {key: str(path) for key, path in self.files.items()},
            "notes": list(self.notes),
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
        lines.append(f"Wrote {self.files['layout']} (layout) and {self.files['report']} (replay report)")
        return "\n".join(lines)


def find_real_trace(cwd=None, environ=None):
    """Look for the real InfiniteHBD trace.

    Candidates, in order: ``$SPARE_TRACE``; ``../shared/data/infinitehbd-trace/
    fault_trace.json`` relative to ``cwd``; the same relative to the source checkout
    that holds this package (editable installs only).

    Parameters
    ----------
    cwd : path, optional
        Folder for the relative candidate (default: the current folder).
    environ : mapping, optional
        Environment (default: ``os.environ``).

    Returns
    -------
    path : pathlib.Path or None
        The first candidate that is a file.
    notes : list of str
        One line per candidate that was named but not found.
    """
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else Path(cwd)
    notes = []
    candidates = []
    if environ.get("SPARE_TRACE"):
        candidates.append(("SPARE_TRACE", Path(environ["SPARE_TRACE"])))
    candidates.append(("current folder", cwd / REAL_TRACE_RELATIVE))
    if (_SOURCE_ROOT / "pyproject.toml").is_file():
        candidates.append(("source checkout", _SOURCE_ROOT / REAL_TRACE_RELATIVE))
    for label, path in candidates:
        if path.is_file():
            return path.resolve(), notes
        if label == "SPARE_TRACE":
            notes.append(f"SPARE_TRACE={path} is not a file: looked further")
    return None, notes


def default_trace_document():
    """The generated failure sequence of the demo, rebuilt from its seed.

    Returns
    -------
    dict
        ``synthetic_fault_trace(nodes=400, seed=0)``: a ``spare-failure-trace``
        document; ``instances/make_instances.py`` writes it to
        ``instances/failures-N400-seed0.json`` and ``spare_opt/data/``.
    """
    return synthetic_fault_trace(nodes=DEMO_GROUPS, seed=DEFAULT_TRACE_SEED)


def load_default_trace():
    """Read the generated failure sequence shipped inside the package.

    Falls back to rebuilding it from its seed (same events) if the data file is
    missing from the installation.

    Returns
    -------
    FaultTrace

    Raises
    ------
    TraceError
        The packaged data file exists but cannot be read or parsed.
    """
    packaged = resources.files("spare_opt").joinpath("data", DEFAULT_TRACE_NAME)
    if packaged.is_file():
        with resources.as_file(packaged) as path:
            return read_fault_trace(path)
    return parse_fault_events(default_trace_document(), source=f"<generated: seed {DEFAULT_TRACE_SEED}>")


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


def run_demo(out_dir=DEFAULT_OUT, trace_path=None, force=False, exact=False, generated=False,
             time_limit=SIDON_TIME_LIMIT, progress=None, cwd=None, environ=None):
    """Run the demo: Sidon layout for ``N = 400``, ``r = r*``, and a fault-trace replay.

    Parameters
    ----------
    out_dir : path, default ``"spare-demo"``
        Output folder, created if needed.
    trace_path : path, optional
        Replay this trace instead of looking for the real one.
    force : bool, default False
        Overwrite existing output files.
    exact : bool, default False
        Replay with the exact planner instead of the online controller.
    generated : bool, default False
        Replay the shipped generated failure sequence even if the real trace is found.
    time_limit : float, default 5.0
        Time limit of the Sidon search (seconds).
    progress : callable, optional
        Passed to :func:`spare_opt.replay_trace`.
    cwd, environ : optional
        Passed to :func:`find_real_trace` (tests).

    Returns
    -------
    DemoResult

    Raises
    ------
    OutputExistsError
        An output file exists and ``force`` is false (checked before any work).
    ParameterError
        ``out_dir`` is empty or not a path.
    OutputWriteError
        ``out_dir`` exists and is not a folder (checked before any work).
    SpareError
        The output folder cannot be created or written.
    TraceError
        ``trace_path`` cannot be read.

    Notes
    -----
    Output files: ``<out_dir>/layout-sidon-N400-r9.json`` (``spare-layout`` JSON)
    and ``<out_dir>/replay-N400-r9.json`` (replay report: layout, trace and replay
    summaries and the per-event rows, plus a digest of the same replay with nodes
    placed on random groups).  ``r* = floor(log2 N + 0.833)`` is the
    closed form of Lee et al., ICML 2026, Sec. 5.
    """
    from .generators import sidon
    from .replay import replay_trace
    from .theory import r_star

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
        trace = read_fault_trace(trace_path)
        kind = "real" if trace.format == "infinitehbd" else "generated"
    else:
        found = None
        if not generated:
            found, notes = find_real_trace(cwd=cwd, environ=environ)
        if found is not None:
            trace, kind = read_fault_trace(found), "real"
        else:
            if not generated:
                notes.append("real InfiniteHBD trace not found (set SPARE_TRACE to its path): "
                             "replaying the generated failure sequence shipped with spare-opt")
            trace, kind = load_default_trace(), "generated"

    started = time.perf_counter()
    layout = sidon(groups, redundancy, time_limit=time_limit, seed=0)
    layout_info = _layout_info(layout, time.perf_counter() - started)

    result = replay_trace(layout, trace, exact=exact, progress=progress)
    random_placement = replay_trace(layout, trace, exact=exact, placement_seed=PLACEMENT_SEED)
    trace_info = {"kind": kind, "path": trace.source, **trace.summary()}
    trace_info.pop("source", None)

    report = {
        "format": "spare-replay-report",
        "version": 1,
        "layout": {key: value for key, value in layout_info.items() if key != "metadata"},
        "trace": trace_info,
        "replay": result.to_json(rows=True),
        "random_placement": _placement_digest(random_placement),
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        layout.save(layout_path, force=force)
        write_atomic(report_path, json.dumps(report, indent=1, default=json_default) + "\n", force=force)
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
    )


def _placement_digest(result):
    keys = ("placement", "wipe_outs", "wipe_out_days", "masked", "max_stack_number", "mean_stack_number", "total_moves")
    return {key: result.summary[key] for key in keys}
