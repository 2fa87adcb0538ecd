"""The steps of :func:`spare_opt.simulation.replay.replay_trace`: reorder engines and the replay state.

The engines give the reorder decisions (the online controller or the exact planner);
:class:`_ReplayState` carries what a replay holds between instants (the live groups, the
current plan, the open faults of the ``repair`` semantics, the counters of the summary)
and applies one batch of starts or ends to it.  ``docs/replay.md`` and ``docs/repair.md``
state the rules.
"""

import numpy as np

from ..planning.plan import MASKED, WIPE_OUT, check_plan


class _ControllerEngine:
    """Reorder decisions from the online controller."""

    name = "controller"

    def __init__(self, layout, micro_batches):
        from ..planning.controller import ReorderController

        self.controller = ReorderController(layout, micro_batches=micro_batches)

    def fail(self, groups):
        # one group as an int: the controller's scalar path, without normalising an array
        return self.controller.fail(int(groups[0]) if len(groups) == 1 else groups)

    def recover(self, groups):
        return self.controller.recover(int(groups[0]) if len(groups) == 1 else groups)

    def restart(self):
        self.controller.restart()


class _ExactEngine:
    """Reorder decisions from the exact planner, carrying the failed set and the previous plan."""

    name = "exact"

    def __init__(self, layout, micro_batches):
        self.layout = layout
        self.micro_batches = micro_batches
        self.restart()

    def _plan(self, failed, order):
        from ..planning.exact import plan_reorder

        if self.micro_batches == 1:
            return plan_reorder(self.layout, failed, order=order, stack_number=self.stack_number)
        return plan_reorder(self.layout, failed, micro_batches=self.micro_batches, split=self.split)

    def _adopt(self, plan, failed):
        if plan.status == MASKED:
            self.failed = failed
            self.order = plan.order
            self.stack_number = plan.stack_number
            self.split = plan.split
        return plan

    def fail(self, groups):
        failed = np.sort(np.concatenate([self.failed, np.asarray(groups, dtype=np.int32)]))
        return self._adopt(self._plan(failed, self.order), failed)

    def recover(self, groups):
        back = np.asarray(groups, dtype=np.int32)
        failed = self.failed[~np.isin(self.failed, back)]
        order = None
        if self.order is not None:  # a returning group resumes with its layout order
            order = np.array(self.order, dtype=np.int32)
            order[back] = self.layout.stacks[back]
        return self._adopt(self._plan(failed, order), failed)

    def restart(self):
        self.failed = np.zeros(0, dtype=np.int32)
        self.order = None
        self.stack_number = 1
        self.split = None


class _ReplayState:
    """What a replay holds between instants, and the batches of starts and ends applied to it.

    ``decided`` (an argument of the batch methods) maps the index of an event of the
    current instant to its row's ``(status, batch, moves)``.
    """

    def __init__(self, layout, trace, engine, m, check_plans, members, repair):
        n = layout.groups
        self.layout, self.trace, self.engine, self.m, self.check_plans = layout, trace, engine, m, check_plans
        self.repair = repair
        if repair:
            self.indptr, self.group_ids = members
            # every node in at most one group (no placement on domains): a batch of one event
            # takes the scalar path, without the array calls of the general one
            self.single = not self.group_ids.size or int(np.diff(self.indptr).max()) <= 1
            self.node_open = np.zeros(trace.n_nodes, dtype=bool)  # an effective fault that holds its groups out
            self.node_replaced = np.zeros(trace.n_nodes, dtype=bool)  # down at the last restart: its end is ignored
            self.down_count = np.zeros(n, dtype=np.int64)  # nodes of each group with an open fault
        self.alive = np.ones(n, dtype=bool)
        self.failed_now = 0
        self.stack_number, self.load = 1, m
        self.order = layout.stacks if check_plans else None
        self.batches = self.masked = self.masked_batches = self.wipe_outs = self.wiped_groups = 0
        self.recoveries = self.recovery_batches = self.ends_after_restart = self.decisions = 0
        self.total_moves = self.max_failed = 0
        self.max_stack, self.max_load = 1, m
        self.wipe_out_days = []
        self.masked_before_wipe_out = []
        self.masked_in_epoch = 0
        # The time-weighted means of S and of the step cost: integral / span, and the same
        # sum in fractions of the span, which stays finite whatever the times
        # (S * (now - t_prev) overflows near 1.8e308 days); the first is kept when finite
        # (the figures of earlier versions).
        self.first, self.last = trace.span_days
        self.span = self.last - self.first
        self.area = self.cost_area = 0.0
        self.mean_stack = self.mean_cost = 0.0
        self.t_prev = float(trace.times_days[0]) if trace.n_events else 0.0

    def advance(self, now):
        """Add the time since the previous instant, at the current ``S`` and step cost, to the means."""
        if self.span > 0:
            stack_number, step_cost, elapsed = self.stack_number, self.load / self.m, now - self.t_prev
            self.area += stack_number * elapsed
            self.mean_stack += stack_number * (elapsed / self.span)
            self.cost_area += step_cost * elapsed
            self.mean_cost += step_cost * (elapsed / self.span)
        self.t_prev = now

    def means(self):
        """The time-weighted means of ``S`` and of the step cost ``L/m`` over the trace span."""
        if self.span > 0:
            mean_stack = float(self.area / self.span) if np.isfinite(self.area) else float(self.mean_stack)
            mean_cost = float(self.cost_area / self.span) if np.isfinite(self.cost_area) else float(self.mean_cost)
            return mean_stack, mean_cost
        return float(self.stack_number), self.load / self.m

    def fail_live(self, groups, events, now, decided):
        """Fail those of ``groups`` that are live (``events[i]`` the event of ``groups[i]``) as one batch."""
        live = self.alive[groups]
        fresh, fresh_events = groups[live], events[live]
        if fresh.size:
            self.fail(fresh, fresh_events, now, decided)

    def fail(self, fresh, fresh_events, now, decided):
        """Fail the live groups ``fresh`` as one batch: masked, or a wipe-out and a global restart."""
        alive = self.alive
        alive[fresh] = False
        batch = self.decisions
        self.decisions += 1
        self.batches += 1
        plan = self.engine.fail(fresh)
        if self.check_plans:
            check_plan(self.layout, plan, previous_order=None if plan.status != MASKED or self.m > 1 else self.order)
        self.failed_now += int(fresh.size)
        self.max_failed = max(self.max_failed, self.failed_now)
        moves = 0
        if plan.status == WIPE_OUT:
            outcome = WIPE_OUT
            self.wipe_outs += 1
            self.wiped_groups += int(fresh.size)
            self.wipe_out_days.append(now)
            self.masked_before_wipe_out.append(self.masked_in_epoch)
            self.masked_in_epoch = 0
            self.engine.restart()
            if self.repair:  # spares replace every node still down
                self.node_replaced |= self.node_open
                self.node_open[:] = False
                self.down_count[:] = 0
            alive[:] = True
            self.failed_now = 0
            self.stack_number, self.load = 1, self.m
            self.order = self.layout.stacks if self.check_plans else None
        else:
            outcome = MASKED
            self.masked += int(fresh.size)
            self.masked_in_epoch += int(fresh.size)
            self.masked_batches += 1
            moves = int(plan.moves)
            self.total_moves += moves
            self._adopt(plan)
        for k in (fresh_events.tolist() if fresh_events.size == 1 else np.unique(fresh_events).tolist()):
            decided[k] = (outcome, batch, moves)

    def recover(self, back):
        """Bring the groups ``back`` back as one batch; returns the decision's number and its moves."""
        plan = self.engine.recover(back)
        if self.check_plans:
            check_plan(self.layout, plan,
                       previous_order=_restored(self.layout, self.order, back) if self.m == 1 else None)
        self.alive[back] = True
        self.failed_now -= int(back.size)
        self.recoveries += int(back.size)
        self.recovery_batches += 1
        moves = int(plan.moves)
        self.total_moves += moves
        self._adopt(plan)  # at m > 1 a recovery's split can widen S
        decision = self.decisions
        self.decisions += 1
        return decision, moves

    def _adopt(self, plan):
        """Take a masked plan's ``S`` and load as current, and into the maxima."""
        self.stack_number, self.load = int(plan.stack_number), int(plan.load)
        self.max_stack = max(self.max_stack, self.stack_number)
        self.max_load = max(self.max_load, self.load)
        self.order = plan.order if self.check_plans else None

    def repair_one(self, is_start, events, node, group, now, decided):
        """Repair semantics, a batch of one event whose node is in one group (or none): scalars."""
        k = int(events[0])
        node_open, down_count = self.node_open, self.down_count
        if not is_start:
            node_replaced = self.node_replaced
            if node_replaced[node]:
                decided[k] = ("replaced", -1, 0)
                self.ends_after_restart += 1
                node_replaced[node] = False
            if k not in decided:
                decided[k] = ("end", -1, 0)
            if not node_open[node]:
                return
            node_open[node] = False
            down_count[group] -= 1
            if down_count[group] or self.alive[group]:
                return
            decision, moves = self.recover(np.array([group], dtype=np.int32))
            decided[k] = ("recovered", decision, moves)  # the batch's one end brings its group back
            return
        node_open[node] = True
        down_count[group] += 1
        if self.alive[group]:  # its one group is live
            self.fail(np.array([group], dtype=np.int32), events, now, decided)

    def repair_starts(self, events, now, decided):
        """Repair semantics: the groups of the batch's nodes go out (those already out stay out)."""
        nodes = self.trace.node[events]
        self.node_open[nodes] = True
        groups, group_events = _groups_of(self.indptr, self.group_ids, nodes, events)
        np.add.at(self.down_count, groups, 1)
        groups, events = _once(groups, group_events)
        self.fail_live(groups, events, now, decided)

    def repair_ends(self, events, decided):
        """Repair semantics: the groups with no node down any more come back."""
        nodes = self.trace.node[events]
        node_open, node_replaced, down_count = self.node_open, self.node_replaced, self.down_count
        for k in events[node_replaced[nodes]].tolist():
            decided[k] = ("replaced", -1, 0)
            self.ends_after_restart += 1
        node_replaced[nodes] = False
        closing = node_open[nodes]
        node_open[nodes[closing]] = False
        groups, group_events = _groups_of(self.indptr, self.group_ids, nodes[closing], events[closing])
        np.add.at(down_count, groups, -1)
        returning = (down_count[groups] == 0) & ~self.alive[groups]
        back = np.unique(groups[returning]).astype(np.int32)
        for k in events.tolist():
            if k not in decided:
                decided[k] = ("end", -1, 0)
        if not back.size:
            return
        decision, moves = self.recover(back)
        last_end = {}  # each returning group is brought back by the last end of its nodes, in file order
        for group, k in zip(groups[returning].tolist(), group_events[returning].tolist()):
            last_end[group] = max(k, last_end.get(group, k))
        for k in set(last_end.values()):
            decided[k] = ("recovered", decision, moves)


def _groups_of(indptr, group_ids, nodes, events):
    """Every group of ``nodes`` (CSR ``indptr``/``group_ids``), with the event of each (``events[i]`` of ``nodes[i]``)."""
    sizes = np.diff(indptr)[nodes]
    starts = np.repeat(indptr[nodes], sizes)
    within = np.arange(starts.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return group_ids[starts + within].astype(np.int32), np.repeat(events, sizes).astype(np.int64)


def _once(groups, events):
    """``groups`` each once, in event order, with the first event of each."""
    _, first = np.unique(groups, return_index=True)
    keep = np.sort(first)
    return groups[keep], events[keep]


def _restored(layout, order, back):
    """``order`` with the rows of the returning groups ``back`` set to their layout order."""
    if order is None:
        return None
    order = np.array(order, dtype=np.int32)
    order[back] = layout.stacks[back]
    return order
