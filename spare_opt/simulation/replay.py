"""Replay of a node fault trace against a stack layout, with the paper's or the ``repair`` semantics.

Each ``fault_start`` fails the DP group its node is mapped to; starts at the same
instant fail together (one reorder decision for the batch); the stack number ``S``
follows the reorder plans; a wipe-out is a global restart from the last checkpoint
(all groups back, ``S = 1``).  What a ``fault_end`` does is the *semantics*:

* ``"paper"`` (the default): it is counted but does not bring a group back (Lee et
  al., ICML 2026, Sec. 6: failed groups never rejoin before a restart);
* ``"repair"``: it brings the node's group back, and the plan is recomputed for the
  groups still out; the ``fault_end`` of a node that was down at the last global
  restart (spares replaced it) is counted and ignored.

``docs/replay.md`` and ``docs/repair.md`` state every rule, including what happens to
irregular events.
"""

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._core import validation as check
from .._core.errors import ParameterError
from .._core.results import Result
from .events import SEMANTICS
from ..planning.plan import MASKED, WIPE_OUT, check_micro_batches
from ..traces.trace import FaultTrace, _cuts, _placement_text
from ..layouts.layout import check_layout
from ._replay_steps import _ControllerEngine, _ExactEngine, _ReplayState

__all__ = [
    "PLANNERS",
    "ReplayRow",
    "ReplayResult",
    "replay_trace",
    "ROW_STATUSES",
    "DEFAULT_PLACEMENTS",
    "MAX_PLACEMENTS",
    "replay_placements",
    "first_fault_warning",
]

#: Reorder engines a replay can take its decisions from.
PLANNERS = ("controller", "exact")

#: What a ``fault_end`` does: nothing before a restart (``"paper"``) or bring the group back (``"repair"``).

#: Irregular-event messages, wipe-out days... printed by :meth:`ReplayResult.format_text` (JSON has all).
SHOWN_IRREGULAR = 20

#: Status of a replay row and its meaning.
ROW_STATUSES = {
    MASKED: "the group failed and the reorder masked it",
    WIPE_OUT: "the group failed in a batch that wiped out a shard type: global restart, all groups back, S = 1",
    "already-out": "the node's group is already out (failed earlier, not back before a restart): no effect",
    "irregular": "irregular event (start for a node already down, end with no start): ignored",
    "skipped": "the node is beyond the cluster's N groups (or not in the placement): ignored",
    "end": "fault_end: counted; the group stays out (paper semantics: until a restart; repair semantics: another "
           "node of the group is still down)",
    "recovered": "fault_end: the group comes back and the plan is recomputed (repair semantics)",
    "replaced": "fault_end of a node that was down at the last global restart (spares replaced it): counted, ignored "
                "(repair semantics)",
}


class ReplayRow(NamedTuple):
    """One event of a replay.

    Attributes
    ----------
    index : int
        Position of the event in the time-sorted trace.
    time_days : float
        Event time (days).
    node : int
        Node index (order of first effective fault, :class:`~spare_opt.traces.trace.FaultTrace`).
    node_id : str
        Node identifier in the trace file.
    group : int
        DP group of the node, ``-1`` when the node is skipped.
    kind : str
        ``"fault_start"`` or ``"fault_end"``.
    fault_class : str
        ``fault_type.Class`` of the event.
    status : str
        One of :data:`ROW_STATUSES`.
    stack_number : int
        ``S`` in force after the event's instant has been processed (1 after a
        wipe-out's restart).
    failed_groups : int
        Groups out after the event's instant.
    batch : int
        Index of the reorder decision this event took part in, ``-1`` for none.
    moves : int
        Moves of that decision (shared by every row of the batch; 0 for none).
    """

    index: int
    time_days: float
    node: int
    node_id: str
    group: int
    kind: str
    fault_class: str
    status: str
    stack_number: int
    failed_groups: int
    batch: int
    moves: int

    def to_dict(self):
        """dict: the row with plain Python values."""
        return {key: getattr(self, key) for key in self._fields}


@dataclass(frozen=True, eq=False)
class ReplayResult(Result):
    """Outcome of :func:`replay_trace`.

    Attributes
    ----------
    summary : dict
        JSON-ready counts and figures; keys are listed in ``docs/replay.md``
        (``faults``, ``masked``, ``wipe_outs``, ``max_stack_number``,
        ``mean_stack_number``, ``fault_ends``, ``irregular``, ``skipped``...).
    rows : tuple of ReplayRow
        One row per trace event, in time order.
    elapsed_seconds : float
        Wall-clock time of the replay (in ``to_dict()``; not compared by ``==``).
    """

    summary: dict
    rows: tuple = field(default=(), repr=False)
    elapsed_seconds: float = field(default=0.0, compare=False)

    def __getitem__(self, key):
        return self.summary[key]

    def to_dict(self, rows=False):
        """The summary as a JSON-ready dict, with the per-event rows under ``"rows"`` when asked."""
        doc = dict(self.summary, elapsed_seconds=self.elapsed_seconds)
        if rows:
            doc["rows"] = [row.to_dict() for row in self.rows]
        return doc

    def format_text(self, rows=False):
        """A readable multi-line summary (and the per-event table when ``rows``)."""
        s = self.summary
        first, last = s["span_days"]
        days = _shortened([f"{round(d, 4)}" for d in s["wipe_out_days"]])
        masked_before = s["masked_before_wipe_out"]
        masked_before = f"[{_shortened([str(m) for m in masked_before])}]" if masked_before else "-"
        irregular = s["irregular"]
        lines = [
            f"Replay of {s['trace']} ({s['trace_format']}: {s['events']} events on {s['nodes']} nodes, "
            f"days {round(first, 4)} to {round(last, 4)})",
            f"Layout: {s['method']}, N = {s['groups']}, r = {s['redundancy']}; planner: {s['planner']}; "
            f"nodes placed on groups by {s['placement']}; {s['semantics']} semantics"
            + (f"; m = {s['micro_batches']} micro-batches per shard type" if s["micro_batches"] > 1 else ""),
            f"Faults: {s['faults']} fault_start, {s['fault_ends']} fault_end "
            + ("(ends are counted; a group does not rejoin before a restart)" if s["semantics"] == "paper" else
               f"({s['recoveries']} groups back in {s['recovery_batches']} batches; {s['ends_after_restart']} "
               "ends of nodes replaced at a restart ignored)"),
            f"Group failures: {s['group_failures']} in {s['batches']} batches (groups failing at one instant): "
            f"{s['masked']} masked in {s['masked_batches']} batches, {s['wipe_outs']} wipe-out(s) of "
            f"{s['group_failures'] - s['masked']} group failures" + (f" at day {days}" if days else "")
            + (f"; {rest} batch(es) of groups already out" if (rest := s["batches"] - s["masked_batches"]
                                                                 - s["wipe_outs"]) else ""),
            f"Masked failures before each wipe-out: {masked_before}; "
            f"since the last restart: {s['masked_since_last_restart']}",
            f"Starts on a group already out: {s['already_out']} (no effect)",
            f"Stack number: max S = {s['max_stack_number']}, time-weighted mean S = {s['mean_stack_number']:.4f}, "
            f"final S = {s['final_stack_number']}"
            + (" (S: most shard types a live group computes part of)" if s["micro_batches"] > 1 else "")
            + (f"; step cost L/m: max {s['max_load']}/{s['micro_batches']}, time-weighted mean "
               f"{s['mean_step_cost']:.4f}" if s["micro_batches"] > 1 else ""),
            f"Most groups out at once: {s['max_out']}; shard moves: {s['total_moves']}",
            f"Irregular events: {sum(irregular.values())} ("
            + ", ".join(f"{count} {kind}" for kind, count in irregular.items()) + ")",
        ]
        messages = s["irregular_events"]
        lines += [f"  {message}" for message in messages[:SHOWN_IRREGULAR]]
        if len(messages) > SHOWN_IRREGULAR:
            lines.append(f"  ... and {len(messages) - SHOWN_IRREGULAR} more irregular events (--json lists all)")
        skipped = s["skipped"]
        # With a placement file (its text starts "placement"), a node is skipped because it is not listed.
        why = "not in the placement" if s["placement"].startswith("placement") else f"beyond N = {s['groups']}"
        lines.append(
            f"Skipped: {skipped['nodes']} node(s) {why} "
            f"({skipped['fault_starts']} fault_start, {skipped['events']} events in all)"
        )
        lines.append(f"Elapsed: {self.elapsed_seconds:.2f} s")
        if rows:
            lines.append("")
            lines.append(f"{'day':>10} {'node':>5} {'group':>5} {'kind':<11} {'status':<11} {'S':>2} {'out':>4} {'moves':>5}  class")
            for row in self.rows:
                lines.append(
                    f"{row.time_days:>10.4f} {row.node:>5} {row.group:>5} {row.kind:<11} {row.status:<11} "
                    f"{row.stack_number:>2} {row.failed_groups:>4} {row.moves:>5}  {row.fault_class}"
                )
        return "\n".join(lines)


def _shortened(items, shown=SHOWN_IRREGULAR):
    """``"a, b, c"``, or the first ``shown`` items and ``"... (k more)"``: text lines stay short."""
    text = ", ".join(items[:shown])
    if len(items) > shown:
        text += f", ... ({len(items) - shown} more; --json lists all)"
    return text


def replay_trace(layout, trace, *, planner="controller", semantics="paper", micro_batches=1, progress=None,
                 check_plans=False, placement_seed=None, placement=None, exact=None):
    """Replay a fault trace on a layout (``docs/replay.md``; ``repair`` semantics: ``docs/repair.md``).

    Parameters
    ----------
    layout : Layout
        The stack layout of ``N`` DP groups.
    trace : FaultTrace
        From :func:`spare_opt.read_fault_trace`.
    planner : {"controller", "exact"}, default "controller"
        Where each reorder decision comes from: the online
        :class:`spare_opt.ReorderController` or the exact planner
        :func:`spare_opt.plan_reorder`.  Both give the same status and least stack
        number ``S*`` (and load ``L*``); only the moves may differ.
    semantics : {"paper", "repair"}, default "paper"
        What a ``fault_end`` does (:data:`SEMANTICS`): nothing before a restart, the
        paper's model, or bring the node's group back.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type (fractional stacking); 1 is the paper's
        model.  The load ``L*`` and step cost ``L*/m`` are reported.
    progress : callable, optional
        ``progress(done, total)`` in events, after each instant.
    check_plans : bool, default False
        Check every plan with :func:`spare_opt.check_plan` (slower; for tests).
    placement_seed : int, optional
        Place nodes on random distinct groups with this seed instead of in order of
        first effective fault (:meth:`~spare_opt.traces.trace.FaultTrace.node_groups`).
    placement : Placement, optional
        Place nodes as this placement says (a group, several groups, or every group of
        a domain per node; :class:`~spare_opt.traces.placement.Placement`); nodes it does not
        list are skipped and counted.  Not together with ``placement_seed``.
    exact : bool, optional
        Deprecated: ``exact=True`` is ``planner="exact"``.

    Returns
    -------
    ReplayResult
        ``summary`` keys include ``semantics``, ``micro_batches``, ``wipe_outs``,
        ``max_out`` (most groups out at once), ``mean_stack_number`` and
        ``mean_step_cost`` (time-weighted), ``max_stack_number``, ``max_load``,
        ``recoveries`` and ``ends_after_restart``.

    Raises
    ------
    ParameterTypeError
        ``layout`` or ``trace`` has the wrong type, ``progress`` is not callable, or
        ``placement_seed`` or ``micro_batches`` is not an integer.
    ParameterError
        Unknown ``planner`` or ``semantics``, a negative ``placement_seed``, or
        ``micro_batches < 1``.
    PlanError
        With ``check_plans``, a plan breaks a rule of :func:`spare_opt.check_plan`.

    Notes
    -----
    Rules, in time order, one instant (all events with equal ``event_time``) at a time;
    the instants and their groups come from :func:`spare_opt.traces.trace.trace_instants`, the
    same step as the trace-driven simulation:

    * nodes are mapped to groups in order of first effective fault (or at random with
      ``placement_seed``, or by ``placement``; :meth:`~spare_opt.traces.trace.FaultTrace.node_groups`);
      nodes beyond ``N`` (or not in the placement) are skipped and reported; a node
      placed on several groups or on a domain fails all of them, in one batch (its
      rows show the lowest of its groups);
    * events the reader flagged as irregular (``FaultTrace.ignored``) do nothing;
    * a wipe-out is a global restart: every group is back (whatever the trace says
      about its node) and ``S = 1``.

    Paper semantics: a ``fault_start`` whose group is live fails it; a ``fault_start``
    whose group is already out (its node was repaired but groups do not rejoin before
    a restart) does nothing (status ``already-out``); all groups newly failed at one
    instant are one batch (one ``fail`` call); ``fault_end`` events are counted only.

    Repair semantics: the events of an instant are taken in file order, in batches
    (:func:`spare_opt.traces.trace.instant_batches`): a run of consecutive ``fault_start``
    events fails its groups together (one ``fail`` call), a run of consecutive
    ``fault_end`` events brings its groups back together (one ``recover`` call, the
    plan recomputed for the groups still out: ``S*`` and ``L*`` can fall); a group
    with several nodes (a placement) is out while any of its nodes is down.  When a
    batch of starts wipes out, the restart brings every group back, those of the batch
    included; the nodes down at that restart were replaced by spares, so their later
    ``fault_end`` is counted (``ends_after_restart``) and ignored (status
    ``replaced``).

    The time-weighted means are ``(1 / (t_last - t_first)) * integral S(t) dt`` (and
    the same for the step cost ``L(t)/m``) over the trace span, the value after each
    instant held until the next; when the span is zero they are the final values.
    ``max_out`` counts the groups out after each batch of starts, those of a batch that
    wipes out included.

    References
    ----------
    Lee et al., "SPARe", ICML 2026, arXiv:2603.00357, Sec. 3-4 (reorder, restart)
    and Sec. 6 (failed groups never rejoin before a restart); ``repair`` semantics:
    ``docs/model.md``, "Repairs".
    """
    planner, semantics, m, check_plans = _resolved_arguments(layout, trace, planner, semantics, micro_batches,
                                                             progress, check_plans, exact)
    repair = semantics == "repair"
    started = time.perf_counter()
    engine = _ExactEngine(layout, m) if planner == "exact" else _ControllerEngine(layout, m)
    members = trace.node_groups(layout.groups, seed=placement_seed, placement=placement, members=True)
    cuts = _cuts(trace, members)  # the instants and batches, cut once per trace and placement
    state = _ReplayState(layout, trace, engine, m, check_plans, members, repair)
    rows, already_out = _replay_instants(state, cuts, progress)
    summary = _replay_summary(state, cuts.node_group, already_out, semantics, _placement_text(placement_seed, placement))
    return ReplayResult(summary=summary, rows=tuple(rows), elapsed_seconds=time.perf_counter() - started)


def _resolved_arguments(layout, trace, planner, semantics, micro_batches, progress, check_plans, exact):
    """The checked arguments of :func:`replay_trace`: ``(planner, semantics, m, check_plans)``."""
    check_layout(layout)
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    check.callback("progress", progress)
    check_plans = check.flag("check_plans", check_plans)
    if exact is not None:
        # stacklevel 3: the warning names the caller of replay_trace
        warnings.warn("replay_trace(exact=...) is deprecated; use planner='exact'", DeprecationWarning, stacklevel=3)
        planner = "exact" if check.flag("exact", exact) else "controller"
    planner = check.choice("planner", planner, PLANNERS)
    semantics = check.choice("semantics", semantics, SEMANTICS)
    m = check_micro_batches(micro_batches, layout.groups)
    return planner, semantics, m, check_plans


def _replay_instants(state, cuts, progress):
    """Replay the instants of ``cuts`` on ``state``, in time order: the rows and the ``already-out`` starts."""
    trace = state.trace
    count = trace.n_events
    batch_lists = cuts.batch_lists() if state.repair else None
    # the per-event columns as Python lists, read once (scalar reads of numpy arrays cost more)
    node_list, node_group_list = trace.node.tolist(), cuts.node_group.tolist()
    columns = (node_list, trace.is_start.tolist(), trace.ignored.tolist(), trace.times_days.tolist(),
               node_group_list, trace.node_ids, trace.fault_class)
    rows = []
    already_out = 0
    for i, instant in enumerate(cuts.instants):
        now = instant.time_days
        state.advance(now)
        decided = {}  # event index -> (status, decision, moves)
        if state.repair:
            for is_start, events in batch_lists[i]:
                if state.single and events.size == 1:
                    node = node_list[int(events[0])]
                    state.repair_one(is_start, events, node, node_group_list[node], now, decided)
                elif is_start:
                    state.repair_starts(events, now, decided)
                else:
                    state.repair_ends(events, decided)
        elif instant.failing.size:  # paper semantics: the instant's starts on live groups, one batch
            state.fail_live(instant.failing, instant.failing_events, now, decided)
        already_out += _instant_rows(rows, instant.start, instant.stop, decided, columns, state.stack_number,
                                     state.failed_now)
        if progress is not None:
            progress(instant.stop, count)
    return rows, already_out


def _instant_rows(rows, a, b, decided, columns, stack_number, failed_now):
    """Append the rows of the events ``a .. b - 1`` of one instant; returns how many are ``already-out``."""
    node_list, is_start_list, ignored_list, time_list, node_group_list, node_ids, fault_class = columns
    new_row = ReplayRow._make
    already_out = 0
    for k in range(a, b):
        node = node_list[k]
        group = node_group_list[node]
        if k in decided:
            status, batch, moves = decided[k]
        else:
            batch, moves = -1, 0
            if ignored_list[k]:
                status = "irregular"
            elif group < 0:
                status = "skipped" if is_start_list[k] else "end"
            elif not is_start_list[k]:
                status = "end"
            else:
                status = "already-out"
                already_out += 1
        # positional, in the order of ReplayRow's fields (index, time_days, node, node_id, group, kind,
        # fault_class, status, stack_number, failed_groups, batch, moves): a call per event
        rows.append(new_row((k, time_list[k], node, node_ids[node], group,
                             "fault_start" if is_start_list[k] else "fault_end", fault_class[k], status,
                             stack_number, failed_now, batch, moves)))
    return already_out


def _replay_summary(state, node_group, already_out, semantics, placement_text):
    """The ``summary`` of a :class:`ReplayResult` from the state at the end of the replay."""
    layout, trace = state.layout, state.trace
    count = trace.n_events
    mean_stack, mean_cost = state.means()
    skipped_nodes = int((node_group < 0).sum())
    skipped_mask = node_group[trace.node] < 0 if count else np.zeros(0, dtype=bool)
    return {
        "planner": state.engine.name,
        "semantics": semantics,
        "micro_batches": state.m,
        "groups": layout.groups,
        "redundancy": layout.redundancy,
        "method": layout.method,
        "trace": trace.source,
        "trace_format": trace.format,
        "placement": placement_text,
        "events": count,
        "nodes": trace.n_nodes,
        "span_days": [state.first, state.last],
        "faults": trace.n_starts,
        "fault_ends": trace.n_ends,
        "group_failures": state.masked + state.wiped_groups,
        "batches": state.batches,
        "masked": state.masked,
        "masked_batches": state.masked_batches,
        "wipe_outs": state.wipe_outs,
        "wipe_out_days": state.wipe_out_days,
        "masked_before_wipe_out": state.masked_before_wipe_out,
        "masked_since_last_restart": state.masked_in_epoch,
        "already_out": already_out,
        "recoveries": state.recoveries,
        "recovery_batches": state.recovery_batches,
        "ends_after_restart": state.ends_after_restart,
        "max_stack_number": state.max_stack,
        "mean_stack_number": mean_stack,
        "final_stack_number": state.stack_number,
        "max_load": state.max_load,
        "mean_step_cost": mean_cost,
        "max_failed_groups": state.max_failed,
        "max_out": state.max_failed,
        "total_moves": state.total_moves,
        "irregular": trace.irregular_counts(),
        "irregular_events": [e.message for e in trace.irregular],
        "skipped": {
            "nodes": skipped_nodes,
            "fault_starts": int((skipped_mask & trace.is_start & ~trace.ignored).sum()),
            "events": int(skipped_mask.sum()),
        },
    }


# ----------------------------------------------------------------------------- placements
#: Random placements a trace-driven replay runs by default.
DEFAULT_PLACEMENTS = 5
#: Most placements one call replays (each is a whole replay of the trace).
MAX_PLACEMENTS = 100_000


def replay_placements(layout, trace, *, seeds=DEFAULT_PLACEMENTS, first_seed=0, workers=1, executor=None,
                      progress=None, **options):
    """Replay a trace over several random node placements: the wipe-outs with their mean and interval.

    Where the traced nodes sit on the groups decides how many failures share shard
    types, so one placement is one draw; the paper's rule (node ``i``, in order of
    first fault, on group ``i``) is a particular one that puts nodes failing one after
    another on neighbouring groups, which share shard types in a circulant layout.

    Parameters
    ----------
    layout : Layout
    trace : FaultTrace
    seeds : int, default 5
        Placements, seeds ``first_seed .. first_seed + seeds - 1``
        (:meth:`~spare_opt.traces.trace.FaultTrace.node_groups`).
    first_seed : int, default 0
    workers : int, default 1
        Processes that replay placements at once (``-1``: every CPU); one placement is
        one task, so more than ``seeds`` processes are not used.  The results do not
        depend on it.
    executor : concurrent.futures.Executor, optional
        Run the placements here instead (a Dask cluster's executor, ``docs/scaling.md``);
        ``workers`` is then ignored.
    progress : callable, optional
        ``progress(done, total)`` in trace events replayed over all placements
        (``seeds * trace.n_events`` in all): after every instant with ``workers=1``, after
        every placement otherwise.
    **options
        Other arguments of :func:`replay_trace` (``planner``, ``semantics``,
        ``micro_batches``...), not ``placement_seed``, ``placement`` nor ``progress``.

    Returns
    -------
    dict
        ``seeds`` (list of int), ``wipe_outs`` and ``masked`` (per seed),
        ``mean_wipe_outs``, ``wipe_outs_ci95`` (95% interval of the mean, ``[nan,
        nan]`` when it cannot be given) and ``first`` (the :class:`ReplayResult` of the
        first seed, with its rows).

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a FaultTrace.
    ParameterError
        ``seeds`` below 1 or above :data:`MAX_PLACEMENTS`, ``placement_seed`` /
        ``placement`` / ``progress`` or an unknown name in ``options``; ``workers`` 0 or
        below -1; any error of :func:`replay_trace`.
    ExecutorError
        A placement could not run on the process pool or ``executor``
        (:func:`spare_opt._core.parallel.run_tasks`).
    """
    from .._core.parallel import check_executor, resolve_workers, run_tasks
    from .._core.stats import mean_ci95

    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    seeds = check.count("seeds", seeds, maximum=MAX_PLACEMENTS)
    first_seed = check.seed(first_seed, "first_seed")
    processes = resolve_workers(workers)
    check_executor(executor)
    check.callback("progress", progress)
    if "placement_seed" in options or "placement" in options or "progress" in options:
        raise ParameterError("replay_placements draws the placements itself and reports progress over all of "
                             "them: no placement_seed, placement or progress")
    unknown = sorted(set(options) - _REPLAY_OPTIONS)
    if unknown:
        raise ParameterError(f"replay_placements: unknown option {unknown[0]!r} (options of replay_trace: "
                             f"{', '.join(sorted(_REPLAY_OPTIONS))})")
    seed_list = [first_seed + s for s in range(seeds)]
    events = trace.n_events
    if executor is None and (processes == 1 or seeds == 1):
        # in this process: the progress of every instant, placement after placement
        results = []
        for index, seed in enumerate(seed_list):
            inner = None
            if progress is not None:
                def inner(done, total, before=index * events):
                    progress(before + done, seeds * events)
            results.append(_placement_summary(layout, trace, seed, options, index == 0, inner))
    else:
        warm_up = None
        if options.get("planner", "controller") == "controller":
            from ..planning.precompile import warm_up as compile_kernels

            check_layout(layout)
            m = check_micro_batches(options.get("micro_batches", 1), layout.groups)

            def warm_up():  # compile once in the parent: the forked workers inherit the kernels
                compile_kernels(micro_batches=(m,))
        tasks = [(layout, trace, seed, options, index == 0, None) for index, seed in enumerate(seed_list)]
        results = run_tasks(_placement_summary, tasks, workers=workers, executor=executor, progress=progress,
                            weights=[max(events, 1)] * seeds, warm_up=warm_up)
    first = results[0]
    wipes = [int(result["wipe_outs"]) for result in results]
    mean, ci = mean_ci95(wipes, lower=0.0)
    return {"seeds": seed_list, "wipe_outs": wipes,
            "masked": [int(result["masked"]) for result in results], "mean_wipe_outs": float(mean),
            "wipe_outs_ci95": [float(ci[0]), float(ci[1])], "first": first}


#: The options of replay_trace that replay_placements passes on.
_REPLAY_OPTIONS = frozenset(("planner", "semantics", "micro_batches", "check_plans", "exact"))


def _placement_summary(layout, trace, seed, options, keep_rows, progress):
    """One placement of :func:`replay_placements`: the whole result for the first, the summary for the rest.

    Module-level so that a process pool can pickle it; only the first placement's rows
    travel back (the others' rows are not used).
    """
    result = replay_trace(layout, trace, placement_seed=seed, progress=progress, **options)
    return result if keep_rows else dict(result.summary)


def first_fault_warning(wipe_outs, placements):
    """One line when the first-fault rule changes the wipe-out count against random placements, else ``None``.

    Parameters
    ----------
    wipe_outs : int
        Wipe-outs of the replay under the first-fault rule.
    placements : dict
        :func:`replay_placements` on the same trace and layout.

    Returns
    -------
    str or None
        The warning when ``wipe_outs`` lies outside the 95% interval of the random
        placements' mean (or differs from every one of them when they all agree).
    """
    low, high = placements["wipe_outs_ci95"]
    if not (math.isfinite(low) and math.isfinite(high)):
        low = min(placements["wipe_outs"])
        high = max(placements["wipe_outs"])
    if low <= wipe_outs <= high:
        return None
    return (f"the first-fault placement gives {wipe_outs} wipe-out(s) against {placements['mean_wipe_outs']:.1f} "
            f"[{low:.1f}, {high:.1f}] over {len(placements['seeds'])} random placements: nodes that fail one after "
            "another sit on neighbouring groups, which share shard types; random placements (the default) are the "
            "fair replay")
