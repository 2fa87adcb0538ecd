"""Plain-Python reference of the time-to-train event loop: the spec of ``run_kernel``.

:func:`naive_run_kernel` takes exactly the inputs of
:func:`spare_opt.simulation._kernels.run_kernel` (the packed ``fparams`` / ``iparams`` and
the trajectory and trace arrays) and returns the same ``R_*`` statistics.  It is written
from the documented semantics (``spare_opt.simulation.time_to_train`` module docstring,
:class:`~spare_opt.simulation.parameters.SimulationParameters`, ``docs/reproduction.md``), one class
per concern, for reading rather than speed.  The only thing it takes from the kernel
module is the index layout of the arrays (``F_*``, ``I_*``, ``R_*``, ``STRATEGY_*``,
``MODEL_*``).

The rules, in one place
-----------------------
A run alternates three phases; every failure is handled by the phase it lands in.  A
failure "lands in" a phase running over ``[start, end)`` when its time is below ``end``
(a failure exactly at ``end`` belongs to whatever comes next).

Every event has an outcome: the stack number ``S`` and the *step cost* ``sigma`` (layers
of compute per step: ``S`` at ``m = 1``, ``L*/m`` with micro-batches) of the job after
it, or a wipe-out.  The last event handled sets them.

*Step* (``sigma`` the step cost at its start): ``sigma`` layers of compute, then the
all-reduce, which is always the last ``allreduce`` seconds of the step.  A masked
failure costs the communicator shrink (SPARe also the controller and ``patch_layers``
layers of patch compute) before the all-reduce; one that lands inside the all-reduce
also loses the elapsed part of it, which is redone.  The new step cost applies from
the next step.  A wipe-out loses the step and the pending progress (rework).  A
*rejoin* (a repaired group, healed, ready at the event's time) joins at the end of the
step: the step is lengthened there by a communicator change (shrink, SPARe: and
controller), charged as overhead, and the new step cost applies from the next step.
Events that land in that lengthening belong to what comes next.

*Checkpoint save* (after a step, once ``period`` seconds of progress have passed since
the last save; never after the last step): a masked failure or a rejoin lengthens the
save by the shrink (and, SPARe, the controller) and sets ``sigma`` at once; a wipe-out
loses the save and the pending progress.  A completed save commits the pending progress.

*Global restart* (after a wipe-out: back to the last checkpoint, every group live,
``S = 1``, or ``r`` for replication): lasts ``restart``.  Failures landing in it are either
absorbed (the restart replaces the node; only counted) or, with ``carry``, stay down: a
masked one sets ``sigma`` for the resumed training at no time cost, a wipe-out means one
more restart right after this one.  A rejoin in a restart is free.  The wall-time cap
is checked before each step and before each additional restart.

Failure times: given events (a trace or events drawn up front: times, kinds and
outcomes, in order; when open-ended, events beyond a horizon are not given yet and a
run that gets there stops asking for more); or one Weibull renewal
process for the cluster (optionally slowed to the live fraction after each failure; a
wipe-out that starts a restart is a renewal point with every group live); or one
Weibull clock per group, all restarted when a restart begins (``carry``) or when
training resumes (``absorb``: no failure inside a restart).  Synthetic outcomes come
from per-epoch trajectories: ``wipe_index[e]`` is the failure that wipes epoch ``e``
out, ``stack_traj[e, k]`` the stack number after ``k`` failures.

Every duration is multiplied by its own ``max(0, Normal(1, sd))`` jitter.  Time
accounting: ``wall = useful + overhead + rework + restart + checkpoint``.

Where the order of floating-point operations is part of the semantics (the all-reduce
start is ``end - allreduce``, the masking cost is ``shrink + (controller + patch)``, the
pending buckets are added when a save commits them) it is spelled out below, so that
with zero jitter the kernel must agree to the last bit.
"""

import math

import numpy as np

from spare_opt.simulation import _kernels as K

__all__ = ["PoolExhausted", "naive_run_kernel"]


class PoolExhausted(Exception):
    """The trajectory pool holds no outcome for this restart epoch, or the given events
    stop at a horizon the run has reached (the caller gives more)."""


# ----------------------------------------------------------------------------- outcomes
class _GivenEvents:
    """Events given up front (a trace, or drawn from a failure model): time, kind, outcome."""

    def __init__(self, events, horizon):
        self.rows = [(float(row[K.EV_TIME]), int(row[K.EV_KIND]), row[K.EV_WIPE] == 1.0, int(row[K.EV_STACK]),
                      float(row[K.EV_COST])) for row in events]
        self.horizon = horizon  # None: every event is given
        self.position = 0

    @property
    def next_time(self):
        if self.position < len(self.rows):
            return self.rows[self.position][0]
        return math.inf if self.horizon is None else self.horizon

    @property
    def next_is_rejoin(self):
        if self.position >= len(self.rows):
            raise PoolExhausted("horizon")  # only reached when next_time is the horizon
        return self.rows[self.position][1] == K.KIND_REJOIN

    def take(self, epoch, failed):
        """Outcome ``(wipe_out, stack_number, step_cost)`` of the next event, which is consumed."""
        _, _, wiped, stack, cost = self.rows[self.position]
        self.position += 1
        return wiped, stack, cost

    def absorb(self, time):
        self.position += 1

    # the times are given: nothing to draw
    def after_failure(self, time, live):
        pass

    def restart_begins(self, time, first):
        pass

    def training_resumes(self, time):
        pass


class _PoolOutcomes:
    """Outcome of the ``failed``-th failure of restart epoch ``epoch`` (synthetic failures)."""

    def __init__(self, strategy, stack_traj, cost_traj, wipe_index):
        self.strategy = strategy
        self.stack_traj = stack_traj
        self.cost_traj = cost_traj
        self.wipe_index = wipe_index

    def outcome(self, epoch, failed):
        if self.strategy == K.STRATEGY_CKPT:
            return True, 1, 1.0  # without redundancy every failure is a wipe-out
        if epoch >= len(self.wipe_index):
            raise PoolExhausted(epoch)
        wiped = int(self.wipe_index[epoch]) == failed
        if self.strategy == K.STRATEGY_REP:
            return wiped, int(self.stack_traj[0, 0]), float(self.cost_traj[0, 0])
        # the trajectory is stored up to its wipe-out; beyond, the last value holds
        column = min(failed, self.stack_traj.shape[1] - 1)
        return wiped, int(self.stack_traj[epoch, column]), float(self.cost_traj[epoch, column])


class _RenewalFailures:
    """One Weibull renewal process for the whole cluster.

    After each failure the next comes one fresh interval later; with
    ``rate_follows_live`` the interval is divided by the live fraction at that moment.
    A wipe-out that starts a restart is a renewal point with every group back.
    """

    def __init__(self, outcomes, rng, scale, shape, groups, follow_live):
        self.outcomes = outcomes
        self.rng = rng
        self.scale = scale
        self.shape = shape
        self.groups = groups
        self.follow_live = follow_live
        self.next_time = self._interval()

    next_is_rejoin = False  # synthetic failures have no repairs

    def _interval(self):
        return self.scale * self.rng.weibull(self.shape)

    def take(self, epoch, failed):
        return self.outcomes.outcome(epoch, failed)

    def after_failure(self, time, live):
        fraction = live / self.groups if self.follow_live else 1.0
        self.next_time = time + self._interval() / fraction if fraction > 0 else math.inf

    def absorb(self, time):
        # an absorbed failure leaves every group live
        self.next_time = time + self._interval()

    def restart_begins(self, time, first):
        # Only the restart that a wipe-out in training starts is a renewal point; a wipe-out
        # inside a restart is an ordinary failure (after_failure drew the next one).
        if first:
            self.next_time = time + self._interval()

    def training_resumes(self, time):
        pass


class _GroupClocks:
    """One Weibull failure clock of mean ``N m`` per group, restarted at each global restart.

    The epoch's failure times are the ``N`` lifetimes drawn when the clocks (re)start,
    sorted; the ``k``-th failure of the epoch is the ``k``-th smallest.  With ``carry``
    the clocks restart when a restart begins, with ``absorb`` when training resumes
    (no failure inside a restart).
    """

    def __init__(self, outcomes, rng, group_scale, shape, groups, carry):
        self.outcomes = outcomes
        self.rng = rng
        self.group_scale = group_scale
        self.shape = shape
        self.groups = groups
        self.carry = carry
        self._start(0.0)

    next_is_rejoin = False  # synthetic failures have no repairs

    def _start(self, time):
        self.lifetimes = np.sort(self.group_scale * self.rng.weibull(self.shape, self.groups))
        self.clock_start = time
        self.next_time = time + self.lifetimes[0]

    def take(self, epoch, failed):
        return self.outcomes.outcome(epoch, failed)

    def after_failure(self, time, live):
        failed = self.groups - live
        self.next_time = self.clock_start + self.lifetimes[failed] if failed < self.groups else math.inf

    def absorb(self, time):
        raise AssertionError("group clocks are stopped during an absorbing restart")

    def restart_begins(self, time, first):
        if self.carry:
            self._start(time)
        else:
            self.next_time = math.inf

    def training_resumes(self, time):
        if not self.carry:
            self._start(time)


# ----------------------------------------------------------------------------- the run
class _Run:
    """State and phases of one run; :meth:`run` returns the ``R_*`` array."""

    def __init__(self, fparams, iparams, failures, rng, base_stack, base_cost, log, jitter_rng=None):
        self.layer = fparams[K.F_LAYER_COMPUTE]
        self.allreduce = fparams[K.F_ALLREDUCE]
        self.shrink = fparams[K.F_SHRINK]
        self.controller = fparams[K.F_CONTROLLER]
        self.restart = fparams[K.F_RESTART]
        self.save = fparams[K.F_SAVE]
        self.period = fparams[K.F_PERIOD]
        self.jitter_sd = fparams[K.F_JITTER]
        self.max_wall = fparams[K.F_MAX_WALL]
        self.patch_layers = fparams[K.F_PATCH_LAYERS]
        self.steps = int(iparams[K.I_STEPS])
        self.groups = int(iparams[K.I_GROUPS])
        self.spare = iparams[K.I_STRATEGY] == K.STRATEGY_SPARE
        self.carry = iparams[K.I_CARRY] == 1
        self.failures = failures
        self.rng = rng
        self.jitter_rng = jitter_rng
        self.base_stack = base_stack
        self.base_cost = base_cost
        self.log = log
        self.out = np.zeros(K.N_RESULTS)
        self._normals = []

        self.t = 0.0
        self.progress = 0           # steps done since the start (committed or pending)
        self.committed = 0          # steps covered by the last checkpoint
        self.since_save = 0.0       # seconds of progress since the last checkpoint
        self.pending_useful = 0.0   # step time a wipe-out would still throw away
        self.pending_overhead = 0.0
        self.epoch = 0
        self.failed = 0             # groups down in this epoch
        self.stack = base_stack     # stack number and step cost of the next step
        self.cost = base_cost
        self.next_stack = base_stack
        self.next_cost = base_cost

    # ------------------------------------------------------------ helpers
    def _jitter(self):
        if self.jitter_sd <= 0:
            return 1.0
        if self.jitter_rng is not None:  # the kernel's stream, one draw at a time
            return max(0.0, self.jitter_rng.normal(1.0, self.jitter_sd))
        if not self._normals:
            # drawn in blocks only because one numpy call per draw is slow
            self._normals = self.rng.normal(1.0, self.jitter_sd, 4096).tolist()
        return max(0.0, self._normals.pop())

    def _note(self, *event):
        if self.log is not None:
            self.log.append(event)

    def _strike(self):
        """Count the next failure as one more group lost in this epoch; return its outcome."""
        self.out[K.R_FAILURES] += 1
        self.failed += 1
        return self.failures.take(self.epoch, self.failed)

    def _rejoin(self):
        """A repaired group is back: one group fewer down; return the stack number and step cost after it."""
        self.out[K.R_REJOINS] += 1
        self.failed -= 1
        _, stack, cost = self.failures.take(self.epoch, self.failed)
        return stack, cost

    def _reconfigure(self, end):
        """``end`` lengthened by a communicator change and, for SPARe, the controller (in this order)."""
        end += self.shrink * self._jitter()
        if self.spare:
            end += self.controller * self._jitter()
        return end

    def _live(self):
        return self.groups - self.failed

    # ------------------------------------------------------------ phases
    def step(self):
        """One training step; False when a wipe-out ended it."""
        start = self.t
        compute = self.cost * self.layer * self._jitter()
        allreduce = self.allreduce * self._jitter()
        end = start + compute + allreduce
        overhead = 0.0
        joining = 0.0  # communicator changes of the groups that join at the end of the step
        self.out[K.R_STACK_STEPS] += self.stack
        self.out[K.R_COST_STEPS] += self.cost
        self.out[K.R_STEPS_EXECUTED] += 1
        while self.failures.next_time < end:
            time = self.failures.next_time
            if self.failures.next_is_rejoin:
                self._note("step", "rejoin")
                self.next_stack, self.next_cost = self._rejoin()
                joining = self._reconfigure(joining)
                continue
            wiped, stack, cost = self._strike()
            if wiped:
                self._note("step", "wipe-out")
                self.out[K.R_REWORK] += self.pending_useful + self.pending_overhead + (time - start)
                self.t = time
                return False
            self.out[K.R_MASKED] += 1
            self.next_stack, self.next_cost = stack, cost
            # detected at the all-reduce: shrink, and for SPARe the controller and the patch
            masking = self.shrink * self._jitter()
            if self.spare:
                masking += self.controller * self._jitter() + self.patch_layers * self.layer * self._jitter()
            allreduce_start = end - allreduce
            if time >= allreduce_start:
                self._note("step", "all-reduce")
                # the all-reduce timed out: its elapsed part is lost, then it runs again
                overhead += (time - allreduce_start) + masking
                end = time + masking + allreduce
            else:
                self._note("step", "compute")
                overhead += masking
                end += masking
            self.failures.after_failure(time, self._live())
        if joining > 0.0:
            overhead += joining
            end += joining
        self.t = end
        self.progress += 1
        self.pending_useful += compute + allreduce
        self.pending_overhead += overhead
        self.since_save += end - start
        self.stack, self.cost = self.next_stack, self.next_cost
        return True

    def checkpoint(self):
        """Save a checkpoint; False when a wipe-out ended it."""
        start = self.t
        end = start + self.save * self._jitter()
        while self.failures.next_time < end:
            time = self.failures.next_time
            if self.failures.next_is_rejoin:
                self._note("save", "rejoin")
                self.stack, self.cost = self.next_stack, self.next_cost = self._rejoin()
                end = self._reconfigure(end)
                continue
            wiped, stack, cost = self._strike()
            if wiped:
                self._note("save", "wipe-out")
                self.out[K.R_CHECKPOINT] += time - start
                self.out[K.R_REWORK] += self.pending_useful + self.pending_overhead
                self.t = time
                return False
            self._note("save", "masked")
            self.out[K.R_MASKED] += 1
            # no step in flight: the new step cost holds from the next step
            self.stack, self.cost = self.next_stack, self.next_cost = stack, cost
            end = self._reconfigure(end)
            self.failures.after_failure(time, self._live())
        self.out[K.R_CHECKPOINT] += end - start
        self.out[K.R_CHECKPOINTS] += 1
        self.out[K.R_USEFUL] += self.pending_useful
        self.out[K.R_OVERHEAD] += self.pending_overhead
        self.pending_useful = self.pending_overhead = self.since_save = 0.0
        self.committed = self.progress
        self.t = end
        return True

    def global_restart(self):
        """Roll back to the last checkpoint and restart, as many times as wipe-outs require."""
        self.progress = self.committed
        self.pending_useful = self.pending_overhead = self.since_save = 0.0
        begin = self.t
        first = True
        while True:
            self.out[K.R_RESTARTS] += 1
            self.epoch += 1
            self.failed = 0
            self.stack = self.next_stack = self.base_stack
            self.cost = self.next_cost = self.base_cost
            self.failures.restart_begins(begin, first)
            end = begin + self.restart * self._jitter()
            self.out[K.R_RESTART] += end - begin
            wiped = False
            while self.failures.next_time < end:
                time = self.failures.next_time
                if self.failures.next_is_rejoin:
                    self._note("restart", "rejoin")
                    self.stack, self.cost = self.next_stack, self.next_cost = self._rejoin()
                    continue
                if not self.carry:
                    self._note("restart", "absorbed")
                    self.out[K.R_FAILURES] += 1
                    self.out[K.R_ABSORBED] += 1
                    self.failures.absorb(time)
                    continue
                wiped, stack, cost = self._strike()
                # the restart runs on to its end whatever this failure does
                self.failures.after_failure(time, self._live())
                if wiped:
                    self._note("restart", "wipe-out")
                    break
                self._note("restart", "masked")
                self.out[K.R_MASKED] += 1
                self.stack, self.cost = self.next_stack, self.next_cost = stack, cost
            if not wiped:
                self.t = end
                self.failures.training_resumes(end)
                return
            # resuming would leave a shard type without holder: one more restart after this one
            begin = end
            first = False
            if begin > self.max_wall:
                self._note("restart", "wall-time cap")
                self.t = begin
                return

    def run(self):
        while self.progress < self.steps and self.t <= self.max_wall:
            if not self.step():
                self.global_restart()
            elif self.progress < self.steps and self.since_save >= self.period:
                if not self.checkpoint():
                    self.global_restart()
        self.out[K.R_WALL] = self.t
        self.out[K.R_USEFUL] += self.pending_useful
        self.out[K.R_OVERHEAD] += self.pending_overhead
        self.out[K.R_FINISHED] = 1.0 if self.progress >= self.steps and self.t <= self.max_wall else 0.0
        self.out[K.R_EPOCHS_USED] = self.epoch + 1
        return self.out


def naive_run_kernel(fparams, iparams, stack_traj, cost_traj, wipe_index, events, seed=None, log=None,
                     kernel_stream=False):
    """Simulate one training run in plain Python; the reference of ``run_kernel``.

    Parameters
    ----------
    fparams : numpy.ndarray of float64, shape (N_FPARAMS,)
    iparams : numpy.ndarray of int64, shape (N_IPARAMS,)
        Packed parameters, as :func:`spare_opt.simulation._runs._pack` fills them.
    stack_traj : numpy.ndarray of int, shape (E, W)
        Synthetic failures: ``stack_traj[e, k]`` is the stack number after ``k`` failures
        of restart epoch ``e`` (replication: one element, ``r``).
    cost_traj : numpy.ndarray of float, shape (E, W)
        Synthetic failures: the step cost after ``k`` failures of epoch ``e``.
    wipe_index : numpy.ndarray of int, shape (E,)
        Synthetic failures: the 1-based failure that wipes epoch ``e`` out (``-1``: none).
    events : numpy.ndarray of float64, shape (F, N_EV)
        Events mode: one row per event (columns ``EV_*``: time, kind, wipe-out flag,
        step cost and stack number after it), sorted by time.
    seed : int or None
        Seed of this reference's own random stream (jitter, failure times); ``None``
        takes ``iparams[I_SEED]``.  It is not the kernel's stream, so runs with jitter
        or synthetic failures agree with the kernel only in law (but see
        ``kernel_stream``).
    log : list or None
        If a list, ``(phase, what)`` is appended for every event handled, e.g.
        ``("step", "all-reduce")``, ``("save", "rejoin")`` or ``("restart",
        "wipe-out")``: tests use it to check which situations a scenario exercises.
    kernel_stream : bool, default False
        Draw the jitters, one at a time, from ``numpy.random.RandomState(seed)``: the
        kernel's stream (numba's ``np.random``: MT19937 seeded by ``init_genrand``,
        polar normals), so that in events mode, where the jitters are the only random
        numbers, the run must equal ``run_kernel`` exactly.  Synthetic failure times
        still come from the reference's own stream.

    Returns
    -------
    numpy.ndarray of float64, shape (N_RESULTS,)
        The ``R_*`` statistics.  When the trajectory pool has no outcome for an epoch,
        or open-ended events stop at a horizon the run reaches, ``R_NEED_MORE`` is 1 and
        the other entries are meaningless: give more and run again with the same seed.

    Notes
    -----
    The run is deterministic for a given seed: with zero jitter in events mode it uses
    no random number at all and must equal ``run_kernel`` exactly.  The rules are in the
    module docstring.
    """
    rng = np.random.default_rng(int(iparams[K.I_SEED]) if seed is None else seed)
    strategy = int(iparams[K.I_STRATEGY])
    shape = fparams[K.F_SHAPE]
    scale = fparams[K.F_MTBF] / math.gamma(1.0 + 1.0 / shape)
    groups = int(iparams[K.I_GROUPS])
    carry = iparams[K.I_CARRY] == 1
    if iparams[K.I_TRACE] == 1:
        horizon = float(fparams[K.F_EVENTS_HORIZON]) if iparams[K.I_EVENTS_OPEN] == 1 else None
        failures = _GivenEvents(events, horizon)
    else:
        outcomes = _PoolOutcomes(strategy, stack_traj, cost_traj, wipe_index)
        if iparams[K.I_FAILURE_MODEL] == K.MODEL_SYSTEM_RENEWAL:
            failures = _RenewalFailures(outcomes, rng, scale, shape, groups, iparams[K.I_RATE_FOLLOWS_LIVE] == 1)
        else:
            # each of the N clocks has mean N m, so N live groups fail every m on average
            failures = _GroupClocks(outcomes, rng, groups * scale, shape, groups, carry)
    replication = strategy == K.STRATEGY_REP
    base_stack = int(stack_traj[0, 0]) if replication else 1
    base_cost = float(cost_traj[0, 0]) if replication else 1.0
    jitter_rng = None
    if kernel_stream:
        jitter_rng = np.random.RandomState(int(iparams[K.I_SEED] if seed is None else seed) & 0xFFFFFFFF)
    run = _Run(fparams, iparams, failures, rng, base_stack, base_cost, log, jitter_rng)
    try:
        return run.run()
    except PoolExhausted:
        run.out[K.R_NEED_MORE] = 1.0
        return run.out
