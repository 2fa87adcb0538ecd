"""Plain reference of the event rules of ``spare_opt.simulation.events``: the walk of a trace.

The rules (``spare_opt.simulation.events`` module docstring) applied with numpy arrays
indexed by the groups of each batch, as the module did before its walk moved to Python
lists and dicts: :func:`naive_trace_events` returns what :func:`spare_opt.trace_events`
returns (rows, wipe-outs, outcomes, counts), and tests assert the two agree.
"""

import heapq
import math

import numpy as np

from spare_opt.simulation.events import FailureEvents, _FAILURE, _REJOIN, trace_seconds
from spare_opt.traces.trace import _cuts

__all__ = ["naive_trace_events"]


class _Outcomes:
    """What failures and rejoins do to a strategy: (wipe-out?, stack number, step cost)."""

    def __init__(self, strategy, groups, redundancy, layout, micro_batches, replan=False):
        self.strategy = strategy
        self.replan = replan
        self.groups = groups
        self.redundancy = redundancy
        self.m = micro_batches
        self.controller = None
        if strategy == "spare":
            from spare_opt.planning.controller import ReorderController

            self.controller = ReorderController(layout, micro_batches=micro_batches)
        if strategy == "rep":
            n_sets = max(1, groups // redundancy)
            self.set_of = np.arange(groups) % n_sets
            self.set_size = np.bincount(self.set_of, minlength=n_sets)
            self.lost = np.zeros(n_sets, dtype=np.int64)
        self.out = 0  # elastic: groups out of the all-reduce

    @property
    def base(self):
        """Stack number and step cost of the fault-free job."""
        return (self.redundancy, float(self.redundancy)) if self.strategy == "rep" else (1, 1.0)

    def _plan_outcome(self, plan):
        return int(plan.stack_number), float(plan.load) / self.m

    def _elastic_outcome(self):
        """Elastic: the step's time per unit of progress, ``N / (N - k)`` with ``k`` groups out."""
        return 1, self.groups / (self.groups - self.out)

    def fail(self, groups):
        if self.strategy == "ckpt":
            return (True,) + self.base
        if self.strategy == "elastic":
            self.out += int(len(groups))
            if self.out >= self.groups:  # every replica is gone: a global restart
                return (True,) + self.base
            return (False,) + self._elastic_outcome()
        if self.strategy == "rep":
            np.add.at(self.lost, self.set_of[groups], 1)
            return (bool(np.any(self.lost >= self.set_size)),) + self.base
        plan = self.controller.fail(int(groups[0]) if len(groups) == 1 else groups)  # one group: the scalar path
        if not plan.masked:
            return (True,) + self.base
        return (False,) + self._plan_outcome(plan)

    def recover(self, groups):
        if self.strategy == "elastic":
            self.out -= int(len(groups))
            return self._elastic_outcome()
        if self.strategy == "rep":
            np.subtract.at(self.lost, self.set_of[groups], 1)
            return self.base
        # The controller's incremental rejoin (also with ``replan``, which once re-planned
        # the groups still down from a restart because recover() ran the exact planner).
        return self._plan_outcome(self.controller.recover(int(groups[0]) if len(groups) == 1 else groups))

    def restart(self):
        self.out = 0
        if self.strategy == "rep":
            self.lost[:] = 0
        elif self.controller is not None:
            self.controller.restart()


class _Sequencer:
    """The event rules (module docstring), applied instant by instant; collects events and counts."""

    def __init__(self, semantics, strategy, groups, redundancy, layout, micro_batches, heal_seconds, replan=False):
        self.semantics = semantics
        self.repair = semantics == "repair"
        self.heal = heal_seconds
        self.outcomes = _Outcomes(strategy, groups, redundancy, layout, micro_batches, replan)
        self.down = np.zeros(groups, dtype=bool)
        self.ready_at = np.full(groups, math.inf)  # heal end of a healing group
        self.heals = []  # heap of (ready time, group)
        self.rows = []   # (time, kind, groups, wipe, cost, stack)
        self.counts = {"fault_starts": 0, "used": 0, "failure_events": 0, "already_down": 0, "fault_ends": 0,
                       "rejoin_events": 0, "rejoined": 0, "ends_after_restart": 0, "heals_cut_by_restart": 0,
                       "failed_while_healing": 0, "ends_ignored": 0}

    def rejoin_until(self, time):
        """Rule 1: the rejoins of every heal that ends at or before ``time``, one event per heal-end time."""
        while self.heals and self.heals[0][0] <= time:
            ready = self.heals[0][0]
            back = []
            while self.heals and self.heals[0][0] == ready:
                _, group = heapq.heappop(self.heals)
                if self.ready_at[group] == ready:  # not cancelled
                    back.append(group)
            if not back:
                continue
            back = np.array(sorted(set(back)), dtype=np.int32)  # a group rejoins once
            self.down[back] = False
            self.ready_at[back] = math.inf
            stack, cost = self.outcomes.recover(back)
            self.rows.append((ready, _REJOIN, back, False, cost, stack))
            self.counts["rejoin_events"] += 1
            self.counts["rejoined"] += int(back.size)

    def instant(self, time, failing, recovering, starts):
        """Rules 2 and 3 at one instant; ``starts`` is the number of usable ``fault_start`` events."""
        self.rejoin_until(time)
        self.counts["fault_starts"] += int(starts)
        after = []  # faults that start and end at this instant: their end comes after the start
        if recovering.size:
            self.counts["fault_ends"] += int(recovering.size)
            if not self.repair:
                self.counts["ends_ignored"] += int(recovering.size)
            else:
                failing_now = set(failing.tolist())
                for group in recovering.tolist():
                    if not self.down[group] and group in failing_now:
                        after.append(group)
                    else:
                        self._end(group, time)
        if failing.size:
            self._fail(time, failing, starts)
        for group in after:
            self._end(group, time)

    def _end(self, group, time):
        """A usable ``fault_end`` under ``repair``: a group that is down starts healing."""
        if not self.down[group] or self.ready_at[group] < math.inf:
            self.counts["ends_after_restart"] += 1  # a restart brought it back
            return
        self.ready_at[group] = time + self.heal
        heapq.heappush(self.heals, (time + self.heal, group))

    def _fail(self, time, failing, starts):
        healing = failing[self.down[failing] & (self.ready_at[failing] < math.inf)]
        if healing.size:  # the node failed again before its group rejoined
            self.ready_at[healing] = math.inf
            self.counts["failed_while_healing"] += int(healing.size)
        fresh = failing[~self.down[failing]]
        self.counts["already_down"] += int(starts) - int(fresh.size) - int(healing.size)
        if not fresh.size:
            return
        self.counts["used"] += int(fresh.size)
        self.counts["failure_events"] += 1
        self.down[fresh] = True
        wiped, stack, cost = self.outcomes.fail(fresh)
        if wiped:
            # global restart: every group back (spares for those still down), heals cut short
            self.counts["heals_cut_by_restart"] += int(np.count_nonzero(self.ready_at < math.inf))
            self.down[:] = False
            self.ready_at[:] = math.inf
            self.heals.clear()
            self.outcomes.restart()
        self.rows.append((time, _FAILURE, np.sort(fresh).astype(np.int32), wiped, cost, stack))

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
            event_groups=tuple(row[2] for row in rows),
            wipe_outs=np.array([row[3] for row in rows], dtype=bool),
            step_costs=np.array([row[4] for row in rows], dtype=np.float64),
            stack_numbers=np.array([row[5] for row in rows], dtype=np.int32),
            counts=counts, complete=complete, horizon_seconds=horizon,
        )


def naive_trace_events(trace, groups, strategy, redundancy, *, semantics="paper", layout=None, micro_batches=1,
                       heal_seconds=0.0, placement_seed=None):
    """The events of ``trace`` under ``semantics`` (arguments checked by the caller), batch by batch."""
    redundancy = 1 if strategy == "elastic" else redundancy
    indptr, group_ids = trace.node_groups(groups, seed=placement_seed, members=True)
    cuts = _cuts(trace, (indptr, group_ids))
    instants, node_group = cuts.instants, cuts.node_group
    batch_lists = cuts.batch_lists()
    batch_group_ptr, batch_groups = cuts.batch_group_ptr.tolist(), cuts.batch_groups
    seconds = trace_seconds(trace, 1.0)
    node_size = np.diff(indptr)
    starts = (trace.is_start & ~trace.ignored) * node_size[trace.node]
    sequencer = _Sequencer(semantics, strategy, groups, redundancy, layout, micro_batches, heal_seconds)
    first_batch = cuts.instant_batch.tolist()
    for i, instant in enumerate(instants):
        time = float(seconds[instant.start])
        if semantics == "paper":
            sequencer.instant(time, instant.failing, instant.recovering, int(np.sum(starts[instant.start:instant.stop])))
            continue
        sequencer.rejoin_until(time)
        for j, (is_start, events) in enumerate(batch_lists[i], start=first_batch[i]):
            batch = batch_groups[batch_group_ptr[j]:batch_group_ptr[j + 1]]
            if is_start:
                sequencer.rejoin_until(time)
                sequencer._fail(time, batch, int(np.sum(starts[events])))
            else:
                sequencer.counts["fault_ends"] += int(batch.size)
                for group in batch.tolist():
                    sequencer._end(group, time)
    sequencer.rejoin_until(math.inf)
    extra = {
        "outside_cluster": int(np.count_nonzero(trace.is_start & ~trace.ignored & (node_group[trace.node] < 0))),
        "ignored_by_reader": int(np.count_nonzero(trace.is_start & trace.ignored)),
    }
    events = sequencer.result(strategy, groups, redundancy, micro_batches, extra=extra)
    events.counts["fault_starts"] = int(trace.n_starts)
    return events
