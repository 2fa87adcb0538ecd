"""Failure events of a training run and what each does to the job: the ``paper`` and ``repair`` semantics.

A run meets two kinds of events: a *failure* takes DP groups down; a *rejoin* brings
a repaired group back.  The rules that turn node faults (a trace, or faults drawn from
a :class:`~spare_opt.traces.failure_model.FailureModel`) into such events live here, in one place, for
the simulation (:func:`spare_opt.simulate`) and for the trace replay:

``"paper"`` (Lee et al., ICML 2026, Sec. 6)
    A failed group stays out until the next global restart, which brings every group
    back; ``fault_end`` events are counted and ignored.
``"repair"`` (``docs/model.md``, "Repairs")
    A group is out from its node's ``fault_start`` to its ``fault_end``.  A returning
    group first *heals* (loads weights and optimizer state from a live peer,
    ``heal_seconds``), then rejoins; the plan is recomputed and the load falls back.
    A wipe-out is still a global restart: spares replace every group still down, so
    every group is back, and the later ``fault_end`` of a node that was down at the
    restart is counted and ignored (so is a heal that the restart cut short).

The rules, applied instant by instant in time order (an instant is every event at one
time, :func:`spare_opt.traces.trace.trace_instants`):

1. rejoins whose heal ends at or before the instant come first (one rejoin event per
   heal-end time);
2. ``paper``: the instant's ``fault_start`` events fail the groups that are up together
   (one failure event, one reorder decision); a start for a group that is down is
   skipped (``already_down``); ``fault_end`` events are counted (``ends_ignored``).
3. ``repair``: the instant's events are taken in file order, in batches of one kind
   (the replay's order, so that a fault that starts and ends at one instant, a repair
   below the trace's resolution, takes its group out and brings it back):

   * a batch of ``fault_end`` events: a group that is down starts healing (ready at
     ``time + heal_seconds``); one that is up (a restart replaced it) is counted and
     ignored (``ends_after_restart``);
   * a batch of ``fault_start`` events: first the heals that ended by now rejoin
     (``heal_seconds = 0`` brings a group whose end came earlier in the instant back
     before the batch), then the groups that are up fail together; a start for a
     group that is down is skipped (``already_down``), except that a group still
     healing goes back to being down and its heal is cancelled
     (``failed_while_healing``).

   Faults drawn from a failure model follow the same rules (at an instant: the ends
   of earlier faults, then the failure event, then the ends of zero-length repairs).

The *outcome* of each event depends only on the sequence of events before it, so it
is computed here, once, up front: wipe-out or not, and the stack number ``S`` and *step
cost* ``sigma`` of the job after it (``S`` at ``m = 1``, ``L*/m`` with ``m``
micro-batches per shard type, ``r`` for replication).  SPARe's outcomes come from the
online controller (:class:`~spare_opt.ReorderController`), whose stack number equals
the exact planner's ``S*`` (and load ``L*``) after every failure set and every rejoin
(:meth:`~spare_opt.ReorderController.recover`).  The simulation kernel then replays the events in time.

The ``"elastic"`` strategy is the rule of TorchFT and FT-HSDP: the live replicas go on
without the groups that are out (each group is its own replica, no redundancy), a
failed group drops out of the all-reduce and heals back like any other, and only the
loss of every group is a wipe-out.  A step with ``k`` groups out takes a fault-free
step's time but makes ``(N - k) / N`` of its progress (its global batch is short by
``k`` groups' samples), so its *step cost* here is the time per unit of progress,
``N / (N - k)``; :func:`spare_opt.simulation._runs.run_events` turns it into layers of
compute for the kernel.

A rejoin's time is the time its heal ends.  A failure that comes after a group's heal
ended but before the step boundary where it joins sees that group live: it holds
the current weights and its data and can take work in the reorder that the failure
triggers (``docs/fractional.md``, "Repairs").
"""

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .._core import validation as check
from .._core.results import Result
from .._core.stats import finite_or_none, weibull_renewals
from .._core.errors import ParameterError
from ..layouts.layout import check_size
from ..planning.plan import check_micro_batches
from .parameters import TooManyEvents

__all__ = [
    "SEMANTICS",
    "SEMANTICS_RULES",
    "EVENT_KINDS",
    "FailureEvents",
    "trace_events",
    "model_events",
]

#: Event semantics, and their rule in one line.
SEMANTICS_RULES = {
    "paper": "a failed group stays out until the next global restart (fault_end ignored)",
    "repair": "a group is out from fault_start to fault_end, then heals (heal_seconds) and rejoins; "
              "a wipe-out still restarts every group",
}
SEMANTICS = tuple(SEMANTICS_RULES)
#: Kinds of events, as :attr:`FailureEvents.kinds` spells them.
EVENT_KINDS = ("failure", "rejoin")
_FAILURE, _REJOIN = 0, 1
#: Events drawn from a failure model per block (a run draws whole blocks: equal seeds
#: give equal events whatever horizon a run ends up needing).
_MODEL_BLOCK = 1024


@dataclass(eq=False)
class FailureEvents(Result):
    """The events of a run, in time order, each with its outcome.

    Attributes
    ----------
    semantics : str
        ``"paper"`` or ``"repair"``.
    strategy : str
        ``"ckpt"``, ``"rep"``, ``"spare"`` or ``"elastic"``.
    groups, redundancy, micro_batches : int
        ``N``, ``r`` and ``m``.
    heal_seconds : float
        Heal time added to each ``fault_end`` before the group rejoins.
    times_seconds : numpy.ndarray of float64, shape (F,)
        Time of each event: the failure's time, or the time a healed group is ready.
    kinds : numpy.ndarray of int8, shape (F,)
        0 for a failure, 1 for a rejoin (:data:`EVENT_KINDS`).
    event_groups : tuple of numpy.ndarray of int32
        The groups each event takes down or brings back.
    wipe_outs : numpy.ndarray of bool, shape (F,)
        True where a failure wipes out (a global restart; never for a rejoin).
    step_costs : numpy.ndarray of float64, shape (F,)
        Step cost ``sigma`` after the event (1 after a wipe-out's restart; for
        ``"elastic"``, ``N / (N - k)`` with ``k`` groups out).
    stack_numbers : numpy.ndarray of int32, shape (F,)
        Stack number ``S`` after the event (1 after a wipe-out's restart; ``r`` for
        replication).
    counts : dict
        What was used and skipped: ``fault_starts``, ``used`` (group failures
        applied), ``failure_events``, ``already_down``, ``fault_ends`` (usable),
        ``rejoin_events``, ``rejoined`` (groups), ``ends_after_restart``,
        ``heals_cut_by_restart``, ``failed_while_healing``, ``ends_ignored`` (paper
        semantics); for a trace also ``outside_cluster`` and ``ignored_by_reader``.
    complete : bool
        False when events after :attr:`horizon_seconds` exist but were not drawn.
    horizon_seconds : float
        Every event up to this time is listed (``inf`` for a whole trace).
    """

    semantics: str
    strategy: str
    groups: int
    redundancy: int
    micro_batches: int
    heal_seconds: float
    times_seconds: np.ndarray
    kinds: np.ndarray
    event_groups: tuple
    wipe_outs: np.ndarray
    step_costs: np.ndarray
    stack_numbers: np.ndarray
    counts: dict = field(default_factory=dict)
    complete: bool = True
    horizon_seconds: float = math.inf

    def __len__(self):
        return int(self.times_seconds.size)

    def to_dict(self):
        """dict: JSON-ready (events as lists; ``horizon_seconds`` is ``None`` when infinite)."""
        return finite_or_none({
            "semantics": self.semantics, "strategy": self.strategy, "groups": self.groups,
            "redundancy": self.redundancy, "micro_batches": self.micro_batches, "heal_seconds": self.heal_seconds,
            "events": [{"time_seconds": float(t), "kind": EVENT_KINDS[int(k)], "groups": g.tolist(),
                        "wipe_out": bool(w), "step_cost": float(c), "stack_number": int(s)}
                       for t, k, g, w, c, s in zip(self.times_seconds, self.kinds, self.event_groups,
                                                   self.wipe_outs, self.step_costs, self.stack_numbers)],
            "counts": dict(self.counts), "complete": self.complete, "horizon_seconds": self.horizon_seconds,
        })

    def kernel_rows(self):
        """numpy.ndarray of float64, shape (F, N_EV): the events as the simulation kernel reads them."""
        from . import _kernels as K

        rows = np.zeros((len(self), K.N_EV))
        rows[:, K.EV_TIME] = self.times_seconds
        rows[:, K.EV_KIND] = np.where(self.kinds == _REJOIN, K.KIND_REJOIN, K.KIND_FAILURE)
        rows[:, K.EV_WIPE] = self.wipe_outs
        rows[:, K.EV_COST] = self.step_costs
        rows[:, K.EV_STACK] = self.stack_numbers
        return rows


# ----------------------------------------------------------------------------- outcomes
# The walk of a trace or of a model's faults is Python per event (a few thousand per
# run): the state is kept in Python lists, dicts and ints, which cost far less per event
# than numpy indexing of one or two groups; only the controller works on arrays.
class _Outcomes:
    """What failures and rejoins do to a strategy: (wipe-out?, stack number, step cost).

    ``fail`` and ``recover`` take a list of group ids (``fail``: in the order they
    fail; ``recover``: sorted).
    """

    def __init__(self, strategy, groups, redundancy, layout, micro_batches, replan=False):
        self.strategy = strategy
        self.replan = replan
        self.groups = groups
        self.redundancy = redundancy
        self.m = micro_batches
        self.controller = None
        if strategy == "spare":
            from ..planning.controller import ReorderController

            self.controller = ReorderController(layout, micro_batches=micro_batches)
        if strategy == "rep":
            n_sets = max(1, groups // redundancy)
            self.set_of = (np.arange(groups) % n_sets).tolist()
            self.set_size = np.bincount(self.set_of, minlength=n_sets).tolist()
            self.lost = [0] * n_sets
        self.out = 0  # elastic, redistribute: groups out
        # redistribute: ``layout`` is the number of groups out at which a restart is taken
        # (the restart rule of the paper's semantics, ``redistribution_restart_threshold``);
        # None: only when every group is down
        self.restart_at = groups if strategy != "redistribute" or layout is None else int(layout)

    @property
    def base(self):
        """Stack number and step cost of the fault-free job."""
        return (self.redundancy, float(self.redundancy)) if self.strategy == "rep" else (1, 1.0)

    def _plan_outcome(self, plan):
        return int(plan.stack_number), float(plan.load) / self.m

    def _elastic_outcome(self):
        """Elastic: the step's time per unit of progress, ``N / (N - k)`` with ``k`` groups out."""
        return 1, self.groups / (self.groups - self.out)

    def _redistribute_outcome(self):
        """Redistribution (``r = N``): the counting bound ``ceil(m N / (N - k)) / m`` layers, ``k`` groups out."""
        from ..planning.plan import lower_bound

        return 1, lower_bound(self.groups, self.out, self.m) / self.m

    def fail(self, groups):
        if self.strategy == "ckpt":
            return (True,) + self.base
        if self.strategy == "redistribute":
            self.out += len(groups)
            if self.out >= self.restart_at:  # every group down, or the restart rule
                return (True,) + self.base
            return (False,) + self._redistribute_outcome()
        if self.strategy == "elastic":
            self.out += len(groups)
            if self.out >= self.groups:  # every replica is gone: a global restart
                return (True,) + self.base
            return (False,) + self._elastic_outcome()
        if self.strategy == "rep":
            lost, set_of, set_size = self.lost, self.set_of, self.set_size
            wiped = False
            for group in groups:
                held = set_of[group]
                lost[held] += 1
                wiped = wiped or lost[held] >= set_size[held]  # every replica of a set is down
            return (wiped,) + self.base
        # one group: the controller's scalar path
        plan = self.controller.fail(groups[0] if len(groups) == 1 else np.array(groups, dtype=np.int32))
        if not plan.masked:
            return (True,) + self.base
        return (False,) + self._plan_outcome(plan)

    def recover(self, groups):
        if self.strategy == "elastic":
            self.out -= len(groups)
            return self._elastic_outcome()
        if self.strategy == "redistribute":
            self.out -= len(groups)
            return self._redistribute_outcome()
        if self.strategy == "rep":
            lost, set_of = self.lost, self.set_of
            for group in groups:
                lost[set_of[group]] -= 1
            return self.base
        # The controller's incremental rejoin (also with ``replan``, which once re-planned
        # the groups still down from a restart because recover() ran the exact planner).
        back = groups[0] if len(groups) == 1 else np.array(groups, dtype=np.int32)
        return self._plan_outcome(self.controller.recover(back))

    def restart(self):
        self.out = 0
        if self.strategy == "rep":
            self.lost = [0] * len(self.lost)
        elif self.controller is not None:
            self.controller.restart()


class _Sequencer:
    """The event rules (module docstring), applied instant by instant; collects events and counts.

    ``down[g]`` says whether group ``g`` is out (failed, or healing); ``ready_at`` maps
    each healing group to the time its heal ends, also the key of its entry in the heap
    ``heals`` (an entry whose time no longer matches was cancelled).
    """

    def __init__(self, semantics, strategy, groups, redundancy, layout, micro_batches, heal_seconds, replan=False):
        self.semantics = semantics
        self.repair = semantics == "repair"
        self.heal = heal_seconds
        self.groups = groups
        self.outcomes = _Outcomes(strategy, groups, redundancy, layout, micro_batches, replan)
        self.down = [False] * groups
        self.ready_at = {}  # healing group -> heal end
        self.heals = []  # heap of (ready time, group)
        self.rows = []   # (time, kind, groups (list), wipe, cost, stack)
        self.counts = {"fault_starts": 0, "used": 0, "failure_events": 0, "already_down": 0, "fault_ends": 0,
                       "rejoin_events": 0, "rejoined": 0, "ends_after_restart": 0, "heals_cut_by_restart": 0,
                       "failed_while_healing": 0, "ends_ignored": 0}

    def rejoin_until(self, time):
        """Rule 1: the rejoins of every heal that ends at or before ``time``, one event per heal-end time."""
        heals = self.heals
        while heals and heals[0][0] <= time:
            ready = heals[0][0]
            back = []
            ready_at = self.ready_at
            while heals and heals[0][0] == ready:
                _, group = heapq.heappop(heals)
                if ready_at.get(group) == ready:  # not cancelled
                    back.append(group)
            if not back:
                continue
            back = sorted(set(back))  # a heal cancelled and begun again at one instant has two entries
            down = self.down
            for group in back:
                down[group] = False
                ready_at.pop(group, None)
            stack, cost = self.outcomes.recover(back)
            self.rows.append((ready, _REJOIN, back, False, cost, stack))
            self.counts["rejoin_events"] += 1
            self.counts["rejoined"] += len(back)

    def instant(self, time, failing, recovering, starts):
        """Rules 2 and 3 at one instant; ``starts`` is the number of usable ``fault_start`` events.

        ``failing`` and ``recovering``: the groups (arrays or lists of ids, each once).
        """
        self.rejoin_until(time)
        self.counts["fault_starts"] += int(starts)
        failing = failing.tolist() if isinstance(failing, np.ndarray) else list(failing)
        recovering = recovering.tolist() if isinstance(recovering, np.ndarray) else list(recovering)
        after = []  # faults that start and end at this instant: their end comes after the start
        if recovering:
            self.counts["fault_ends"] += len(recovering)
            if not self.repair:
                self.counts["ends_ignored"] += len(recovering)
            else:
                failing_now = set(failing)
                for group in recovering:
                    if not self.down[group] and group in failing_now:
                        after.append(group)
                    else:
                        self._end(group, time)
        if failing:
            self._fail(time, failing, starts)
        for group in after:
            self._end(group, time)

    def _end(self, group, time):
        """A usable ``fault_end`` under ``repair``: a group that is down starts healing."""
        if not self.down[group] or group in self.ready_at:
            self.counts["ends_after_restart"] += 1  # a restart brought it back
            return
        self.ready_at[group] = time + self.heal
        heapq.heappush(self.heals, (time + self.heal, group))

    def _fail(self, time, failing, starts):
        """The groups ``failing`` (a list of ids, each once) fail at ``time``."""
        down, ready_at = self.down, self.ready_at
        counts = self.counts
        fresh = []
        healing = 0
        for group in failing:
            if not down[group]:
                fresh.append(group)
            elif group in ready_at:  # the node failed again before its group rejoined
                del ready_at[group]
                healing += 1
        if healing:
            counts["failed_while_healing"] += healing
        counts["already_down"] += int(starts) - len(fresh) - healing
        if not fresh:
            return
        counts["used"] += len(fresh)
        counts["failure_events"] += 1
        for group in fresh:
            down[group] = True
        wiped, stack, cost = self.outcomes.fail(fresh)
        if wiped:
            # global restart: every group back (spares for those still down), heals cut short
            counts["heals_cut_by_restart"] += len(ready_at)
            self.down = [False] * self.groups
            ready_at.clear()
            self.heals.clear()
            self.outcomes.restart()
        self.rows.append((time, _FAILURE, sorted(fresh), wiped, cost, stack))

    def result(self, strategy, groups, redundancy, micro_batches, complete=True, horizon=math.inf, extra=None):
        rows = self.rows
        counts = dict(self.counts)
        if extra:
            counts.update(extra)
        return FailureEvents(
            semantics=self.semantics, strategy=strategy, groups=groups, redundancy=redundancy,
            micro_batches=micro_batches, heal_seconds=self.heal,
            times_seconds=np.array([row[0] for row in rows], dtype=np.float64),
            kinds=np.array([row[1] for row in rows], dtype=np.int8),
            event_groups=tuple(np.array(row[2], dtype=np.int32) for row in rows),
            wipe_outs=np.array([row[3] for row in rows], dtype=bool),
            step_costs=np.array([row[4] for row in rows], dtype=np.float64),
            stack_numbers=np.array([row[5] for row in rows], dtype=np.int32),
            counts=counts, complete=complete, horizon_seconds=horizon,
        )


def _check_common(groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds):
    """Checked ``(groups, redundancy, layout, micro_batches, heal_seconds)`` of an event source."""
    from ._runs import check_run_layout, check_strategy

    check.choice("semantics", semantics, SEMANTICS)
    groups, _ = check_size(groups, 1)
    if strategy == "elastic":  # every group is its own replica: no redundancy to give
        redundancy = 1
    elif strategy == "redistribute":  # every survivor may take any micro-batch: r = N
        redundancy = groups
    else:
        redundancy = check_strategy(strategy, redundancy, groups)
    micro_batches = check_micro_batches(micro_batches, groups)
    if strategy == "spare":
        layout = check_run_layout(layout, groups, redundancy)
    elif strategy == "redistribute" and layout is not None:  # the restart threshold, not a layout
        layout = check.integer("restart threshold", layout, minimum=1, maximum=groups)
    heal_seconds = check.number("heal_seconds", heal_seconds, minimum=0.0)
    return groups, redundancy, layout, micro_batches, heal_seconds


# ----------------------------------------------------------------------------- sources
def trace_seconds(trace, time_scale=1.0):
    """The event times of a trace in seconds: ``times_days * 86400 * time_scale``, all finite.

    Parameters
    ----------
    trace : spare_opt.traces.trace.FaultTrace
    time_scale : float, default 1.0
        Seconds per trace second, finite and ``> 0``.

    Returns
    -------
    numpy.ndarray of float64, shape (E,)

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace`.
    ParameterError
        ``time_scale`` is not a finite number ``> 0``.
    TraceError
        A time overflows a float once converted (day 1.7e308 is a finite number of
        days but an infinite number of seconds).  The message names the trace, the
        largest day and the time scale, the two things the user gave.
    """
    from .._core.errors import TraceError
    from ..traces.trace import FaultTrace

    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    time_scale = check.number("time_scale", time_scale, above=0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        seconds = trace.times_days * 86400.0 * time_scale  # the same rounding as day * 86400 * scale
        if not np.all(np.isfinite(seconds)):
            # day * 86400 overflows before a small scale brings it back: scale first.
            seconds = trace.times_days * (86400.0 * time_scale)
    if not np.all(np.isfinite(seconds)):
        worst = float(np.max(np.abs(trace.times_days)))
        raise TraceError(
            f"{trace.source}: day {worst:g} times 86400 s times the trace time scale {time_scale:g} overflows "
            "a float; the trace's times are too large to simulate (lower the time scale)"
        )
    return seconds


def trace_events(trace, groups, strategy, redundancy, *, semantics="paper", layout=None, micro_batches=1,
                 heal_seconds=0.0, time_scale=1.0, placement_seed=None, placement=None, replan=False):
    """The events of a fault trace under a semantics, with their outcomes.

    The trace is cut into instants by :func:`spare_opt.traces.trace.trace_instants` (the step
    shared with :func:`spare_opt.replay_trace`), then the rules of this module apply
    (module docstring).

    Parameters
    ----------
    trace : spare_opt.traces.trace.FaultTrace
    groups : int
        ``N``.
    strategy : {"ckpt", "rep", "spare", "elastic"}
    redundancy : int
        ``r`` (ignored for ``"ckpt"`` and ``"elastic"``).
    semantics : {"paper", "repair"}, default "paper"
    layout : Layout or None
        SPARe layout of ``N`` groups and redundancy ``r`` (``None``: the default Sidon
        layout, :func:`spare_opt.simulation.time_to_train.default_layout`).
    micro_batches : int, default 1
        ``m``, micro-batches per shard type (SPARe).
    heal_seconds : float, default 0.0
        Seconds from a ``fault_end`` to the rejoin (``repair`` semantics); not scaled
        by ``time_scale`` (it is a duration of the job, not of the trace).
    time_scale : float, default 1.0
        Seconds per trace second (``< 1`` compresses the trace).
    placement_seed : int or None
        Random node-to-group placement (:meth:`~spare_opt.traces.trace.FaultTrace.node_groups`).
    placement : Placement or None
        Explicit node placement (a node on a domain fails all its groups); not
        together with ``placement_seed``.
    replan : bool, default False
        Accepted for compatibility, no effect: repaired groups come back through
        :meth:`~spare_opt.ReorderController.recover`, whose incremental rejoin costs
        about as much as a failure (it once ran the exact planner, and ``replan``
        re-planned the groups still down instead).  Wipe-outs, stack numbers at
        ``m = 1`` and step costs depend on the failed set only.

    Returns
    -------
    FailureEvents
        Complete (``horizon_seconds`` infinite).  Heals still running after the last
        trace event end with their rejoin.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace`, or an argument has
        the wrong type.
    ParameterError
        Unknown strategy or semantics, ``N``, ``r`` or ``m`` out of range, a layout
        of the wrong shape, a negative ``heal_seconds`` or a bad ``time_scale``.
    TraceError
        The trace's times overflow a float in seconds (:func:`trace_seconds`).

    Examples
    --------
    >>> from spare_opt import parse_fault_events
    >>> trace = parse_fault_events([
    ...     {"node_id": "a", "event_time": 1.0, "event_type": "fault_start", "fault_type": {"Class": "GPU"}},
    ...     {"node_id": "a", "event_time": 2.0, "event_type": "fault_end", "fault_type": {"Class": "GPU"}}])
    >>> events = trace_events(trace, 4, "rep", 2, semantics="repair", heal_seconds=60.0)
    >>> events.times_seconds.tolist(), events.kinds.tolist()
    ([86400.0, 172860.0], [0, 1])
    """
    from ..traces.trace import FaultTrace

    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    groups, redundancy, layout, micro_batches, heal_seconds = _check_common(
        groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds)
    time_scale = check.number("time_scale", time_scale, above=0.0)
    return _trace_events(trace, groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds,
                         time_scale, placement_seed, placement, replan)


def _trace_events(trace, groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds, time_scale,
                  placement_seed=None, placement=None, replan=False):
    """:func:`trace_events` on checked arguments.

    Arguments are checked by the caller (:func:`trace_events`, or :func:`spare_opt.simulate`,
    whose checks of a run are the same); the placement is checked by
    :meth:`~spare_opt.traces.trace.FaultTrace.node_groups` and ``replan`` here, in that order.
    """
    from ..traces.trace import _cuts

    # groups each node's start fails (1 unless a placement gives a node several)
    indptr, group_ids = trace.node_groups(groups, seed=placement_seed, placement=placement, members=True)
    cuts = _cuts(trace, (indptr, group_ids))  # cut once per trace and placement, shared by the calls
    instants, node_group = cuts.instants, cuts.node_group
    seconds = trace_seconds(trace, time_scale)
    node_size = np.diff(indptr)
    starts = (trace.is_start & ~trace.ignored) * node_size[trace.node]
    replan = check.flag("replan", replan)
    sequencer = _Sequencer(semantics, strategy, groups, redundancy, layout, micro_batches, heal_seconds, replan)
    times = seconds[cuts.bounds[:-1]].tolist()  # of each instant
    if semantics == "paper":
        # usable starts per instant (a node on several groups counts once per group)
        per_instant = np.add.reduceat(starts, cuts.bounds[:-1]).tolist() if starts.size else []
        for i, instant in enumerate(instants):
            sequencer.instant(times[i], instant.failing, instant.recovering, per_instant[i])
    else:
        # repair: the instant's events in file order, in batches of one kind (as the replay
        # takes them); per batch its kind, its groups and its usable starts, as lists
        kinds = cuts.batch_start.tolist()
        ptr = cuts.batch_group_ptr.tolist()
        members = cuts.batch_groups.tolist()
        batch_groups = [members[ptr[j]:ptr[j + 1]] for j in range(len(kinds))]
        event_ptr = cuts.batch_ptr
        batch_starts = np.add.reduceat(starts[cuts.batch_events], event_ptr[:-1]).tolist() if kinds else []
        edges = cuts.instant_batch.tolist()
        rejoin_until, fail, end, counts = sequencer.rejoin_until, sequencer._fail, sequencer._end, sequencer.counts
        heals = sequencer.heals
        for i in range(len(instants)):
            time = times[i]
            if heals and heals[0][0] <= time:
                rejoin_until(time)
            for j in range(edges[i], edges[i + 1]):
                batch = batch_groups[j]
                if kinds[j]:
                    if heals and heals[0][0] <= time:
                        rejoin_until(time)  # heals of zero length from ends earlier in the instant
                    fail(time, batch, batch_starts[j])
                else:
                    counts["fault_ends"] += len(batch)
                    for group in batch:
                        end(group, time)
    sequencer.rejoin_until(math.inf)
    extra = {
        "outside_cluster": int(np.count_nonzero(trace.is_start & ~trace.ignored & (node_group[trace.node] < 0))),
        "ignored_by_reader": int(np.count_nonzero(trace.is_start & trace.ignored)),
    }
    events = sequencer.result(strategy, groups, redundancy, micro_batches, extra=extra)
    events.counts["fault_starts"] = int(trace.n_starts)
    return events


class _ModelSource:
    """Node faults drawn block by block from a failure model, through the event rules."""

    def __init__(self, fault_model, groups, sequencer, seed):
        self.model = fault_model
        self.groups = groups
        self.sequencer = sequencer
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3]))
        # each group fails like one node of the fitted cluster: the event rate scales with N
        self.stretch = fault_model.cluster_nodes / groups
        self.now = 0.0           # time of the last failure event drawn
        self.up_at = np.zeros(groups)  # when each node is repaired (node level)
        self.ends = []           # heap of (repair end, group) not yet handed to the rules
        self.pending = deque()   # failure instants drawn, not yet handed: (time, groups)
        self.lost_events = 0     # events that found every node down
        self.drawn = 0           # failure events drawn (the bound: MAX_SAMPLE_EVENTS)
        self.handled_until = -math.inf

    def _draw_block(self):
        from ..traces.failure_model import MAX_SAMPLE_EVENTS

        self.drawn += _MODEL_BLOCK
        if self.drawn > MAX_SAMPLE_EVENTS:
            gap = self.model.event_mtbf_seconds * self.stretch
            raise TooManyEvents(
                f"the run needs more than {MAX_SAMPLE_EVENTS:,} failure events of the model (one every "
                f"{gap:g} s on {self.groups} groups, up to {self.now:.3g} s): lower max_wall_factor or steps, or use "
                "a model with rarer failures", gap)
        model, rng = self.model, self.rng
        gaps = model.sample_gaps_seconds(rng, _MODEL_BLOCK) * self.stretch
        sizes = model.sample_event_sizes(rng, _MODEL_BLOCK)
        from ..traces.failure_model import _pick_live

        for gap, size in zip(gaps.tolist(), sizes.tolist()):
            self.now += gap
            hit = _pick_live(rng, self.up_at, self.now, min(int(size), self.groups))
            if not hit:
                self.lost_events += 1
                continue
            repairs = model.sample_repair_seconds(rng, len(hit))
            for group, repair in zip(hit, repairs.tolist()):
                self.up_at[group] = self.now + repair
                heapq.heappush(self.ends, (self.now + repair, group))
            self.pending.append((self.now, np.array(hit, dtype=np.int32)))

    def advance(self, horizon):
        """Hand every fault up to ``horizon`` to the rules."""
        from ..traces.failure_model import MAX_SAMPLE_EVENTS

        # renewals, not horizon / mean (tiny shapes draw far more); gaps are at least the window
        model, stretch = self.model, self.stretch
        expected = weibull_renewals(horizon, model.event_mtbf_seconds * stretch, model.weibull_shape)
        if model.window_seconds > 0:
            expected = min(expected, horizon / (model.window_seconds * stretch))
        if not expected <= MAX_SAMPLE_EVENTS:  # refuse before drawing (the count drawn is bounded too)
            count = f"{expected:,.0f}" if expected < 1e15 else f"{expected:.3g}"  # not 300 digits
            gap = self.model.event_mtbf_seconds * self.stretch
            raise TooManyEvents(
                f"the run needs about {count} failure events of the model (one every {gap:g} s on {self.groups} "
                f"groups, up to {horizon:.3g} s), more than {MAX_SAMPLE_EVENTS:,}: lower max_wall_factor or steps, "
                "or use a model with rarer failures", gap)
        while self.now <= horizon:
            self._draw_block()
        sequencer = self.sequencer
        while self.pending and self.pending[0][0] <= horizon:
            time, hit = self.pending.popleft()
            self._ends_until(time, inclusive=False)
            ending = []  # repairs that end at this very instant (zero-length repairs among them)
            while self.ends and self.ends[0][0] == time:
                ending.append(heapq.heappop(self.ends)[1])
            sequencer.instant(time, hit, np.array(ending, dtype=np.int32), hit.size)
        self._ends_until(horizon, inclusive=True)
        sequencer.rejoin_until(horizon)
        self.handled_until = horizon

    def _ends_until(self, time, inclusive):
        empty = np.zeros(0, dtype=np.int32)
        while self.ends and (self.ends[0][0] <= time if inclusive else self.ends[0][0] < time):
            end = self.ends[0][0]
            back = []
            while self.ends and self.ends[0][0] == end:
                back.append(heapq.heappop(self.ends)[1])
            self.sequencer.instant(end, empty, np.array(back, dtype=np.int32), 0)


def model_events(fault_model, groups, strategy, redundancy, *, horizon_seconds, semantics="paper", layout=None,
                 micro_batches=1, heal_seconds=0.0, seed=0):
    """Events drawn from a failure model up to a horizon, with their outcomes.

    Failure events arrive by the model's renewal process from time 0 (Weibull gaps,
    :meth:`~spare_opt.traces.failure_model.FailureModel.sample_gaps_seconds`), each taking a drawn number
    of groups (:meth:`~spare_opt.traces.failure_model.FailureModel.sample_event_sizes`) chosen uniformly
    among the groups whose node is up; each gets a drawn repair time
    (:meth:`~spare_opt.traces.failure_model.FailureModel.sample_repair_seconds`: by default the
    empirical repairs of the fitted trace, which ``docs/fit.md`` found are not
    lognormal).  Each group fails like one node of the fitted cluster: the gaps are
    scaled by ``cluster_nodes / N`` so the per-node rate is the model's.  The faults
    then go through the rules of this module like a trace's (module docstring).  A
    node under repair cannot fail again, even when a restart put a spare in its place.

    Parameters
    ----------
    fault_model : spare_opt.traces.failure_model.FailureModel
    groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds
        As for :func:`trace_events`.
    horizon_seconds : float
        Draw every event up to this time (``> 0``).
    seed : int, default 0
        Seed of the draws (``numpy.random.SeedSequence([seed, 3])``).  Events are
        drawn in blocks of 1024 failure events, so equal seeds give equal events up
        to any horizon: a longer horizon only adds events after the shorter one's.

    Returns
    -------
    FailureEvents
        ``complete`` False; ``counts`` adds ``lost_events`` (failure events that found
        every node down).

    Raises
    ------
    ParameterTypeError
        ``fault_model`` is not a :class:`~spare_opt.traces.failure_model.FailureModel`, or an argument
        of the wrong type.
    ParameterError
        As :func:`trace_events`, a bad horizon or seed, or more than
        :data:`~spare_opt.traces.failure_model.MAX_SAMPLE_EVENTS` failure events before the horizon.
    """
    source = _model_source(fault_model, groups, strategy, redundancy, semantics, layout, micro_batches,
                           heal_seconds, seed)
    horizon_seconds = check.number("horizon_seconds", horizon_seconds, above=0.0)
    return _model_events_until(source, horizon_seconds)


def _model_source(fault_model, groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds, seed,
                  replan=False):
    from ..traces.failure_model import FailureModel

    check.instance("fault_model", fault_model, FailureModel, " (spare_opt.FailureModel.load or fit_trace(...).model)")
    groups, redundancy, layout, micro_batches, heal_seconds = _check_common(
        groups, strategy, redundancy, semantics, layout, micro_batches, heal_seconds)
    seed = check.seed(seed)
    sequencer = _Sequencer(semantics, strategy, groups, redundancy, layout, micro_batches, heal_seconds, replan)
    source = _ModelSource(fault_model, groups, sequencer, seed)
    source.key = (strategy, groups, redundancy, micro_batches)
    return source


def _model_events_until(source, horizon):
    """The events of ``source`` up to ``horizon`` (it keeps its state: a later horizon continues it)."""
    if horizon > source.handled_until:
        source.advance(horizon)
    strategy, groups, redundancy, micro_batches = source.key
    return source.sequencer.result(strategy, groups, redundancy, micro_batches, complete=False, horizon=horizon,
                                   extra={"lost_events": source.lost_events})
