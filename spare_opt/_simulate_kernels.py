"""Numba kernel of the time-to-train discrete-event simulation (private).

The public API is :func:`spare_opt.simulate.simulate`; this module holds only the
jitted event loop, which takes flat arrays and scalars.  It is imported lazily (never
by ``import spare_opt``) because the first call compiles it (``cache=True`` keeps the
compiled code on disk for later processes when the folder is writable).

Layout of the parameter arrays
------------------------------
``fparams`` (float64) and ``iparams`` (int64) are indexed by the ``F_*`` and ``I_*``
constants below; :func:`spare_opt.simulate._pack` fills them.  The kernel
returns a float64 array indexed by the ``R_*`` constants.
"""

import math

import numpy as np
from ._jit import kernel

# ---------------------------------------------------------------- float parameters
F_LAYER_COMPUTE = 0      # seconds of compute per stack layer per step
F_ALLREDUCE = 1          # seconds of all-reduce per step
F_SHRINK = 2             # seconds to shrink the communicator after a masked failure
F_CONTROLLER = 3         # seconds of controller (reorder) time per masked failure
F_RESTART = 4            # seconds of one global restart
F_SAVE = 5               # seconds to save one checkpoint
F_PERIOD = 6             # checkpoint period: seconds of progress between checkpoints
F_MTBF = 7               # system MTBF m (all groups live), seconds
F_SHAPE = 8              # Weibull shape k of the inter-arrival times
F_JITTER = 9             # standard deviation of the multiplicative jitter
F_MAX_WALL = 10          # give up (unfinished run) after this many wall seconds
F_PATCH_LAYERS = 11      # layers of patch compute per masked failure that hits a step
F_MAX_FAILURES = 12      # stop (R_CAPPED) after this many failures: the bound of the event loop
N_FPARAMS = 13

# ------------------------------------------------------------------ int parameters
I_STEPS = 0              # training steps to complete
I_GROUPS = 1             # DP groups N
I_STRATEGY = 2           # STRATEGY_* below
I_RATE_FOLLOWS_LIVE = 3  # 1: failure rate proportional to the live fraction
I_CARRY = 4              # 1: failures during a restart stay down when training resumes
I_SEED = 5               # seed of the kernel's random stream
I_TRACE = 6              # 1: failure times come from ``trace_times`` (not Weibull)
I_FAILURE_MODEL = 7      # MODEL_* below
N_IPARAMS = 8

MODEL_SYSTEM_RENEWAL = 0  # one Weibull renewal process for the whole cluster
MODEL_GROUP_CLOCKS = 1    # one Weibull failure clock per group, reset when training resumes

STRATEGY_CKPT = 0
STRATEGY_REP = 1
STRATEGY_SPARE = 2

# ------------------------------------------------------------------------ results
R_WALL = 0
R_USEFUL = 1
R_OVERHEAD = 2
R_REWORK = 3
R_RESTART = 4
R_CHECKPOINT = 5
R_RESTARTS = 6
R_MASKED = 7
R_ABSORBED = 8
R_STACK_STEPS = 9        # sum over executed steps of the stack number S
R_STEPS_EXECUTED = 10    # executed steps (committed and rolled back)
R_FINISHED = 11          # 1.0 when all steps completed before F_MAX_WALL
R_EPOCHS_USED = 12       # trajectories consumed (synthetic failures)
R_NEED_MORE = 13         # 1.0 when the trajectory pool ran out (rerun with more)
R_CHECKPOINTS = 14       # checkpoints completed
R_FAILURES = 15          # failures that struck (masked + wipe-outs + absorbed)
R_CAPPED = 16            # 1.0 when the run stopped at F_MAX_FAILURES failures (the caller refuses it)
N_RESULTS = 17


@kernel
def _jitter(sd):
    if sd <= 0.0:
        return 1.0
    value = np.random.normal(1.0, sd)
    return value if value > 0.0 else 0.0


@kernel
def _weibull(scale, shape):
    # Inverse transform: X = scale * (-ln U)^(1/k), mean scale * Gamma(1 + 1/k).
    u = np.random.random()
    return scale * (-math.log(1.0 - u)) ** (1.0 / shape)


@kernel
def _outcome(strategy, trace_mode, k, epoch, trace_pos, stack_traj, wipe_index, trace_stack, trace_wipe):
    """Outcome of the next failure: (wipe-out?, stack number after it, pool exhausted?)."""
    if trace_mode:
        return trace_wipe[trace_pos] == 1, np.int64(trace_stack[trace_pos]), False
    if strategy == STRATEGY_CKPT:
        return True, np.int64(1), False
    if epoch >= wipe_index.shape[0]:
        return False, np.int64(1), True
    is_wipe = wipe_index[epoch] == k
    if strategy == STRATEGY_REP:
        return is_wipe, np.int64(stack_traj[0, 0]), False
    column = k if k < stack_traj.shape[1] else stack_traj.shape[1] - 1
    return is_wipe, np.int64(stack_traj[epoch, column]), False


@kernel
def _record_failure(out, strategy, trace_mode, k, epoch, trace_pos, stack_traj, wipe_index, trace_stack,
                    trace_wipe, trace_times, next_fail, max_failures):
    """Count failure ``k`` of the epoch, look up its outcome and, in trace mode, move to the next trace failure.

    Returns ``(is_wipe, new_stack, need_more, trace_pos, next_fail)``; ``need_more`` also
    sets ``out[R_NEED_MORE]`` (the caller returns ``out`` at once).  Beyond
    ``max_failures`` failures it sets ``out[R_CAPPED]`` and returns ``need_more`` too:
    the event loop always ends.
    """
    out[R_FAILURES] += 1.0
    if out[R_FAILURES] > max_failures:
        out[R_CAPPED] = 1.0
        return False, np.int64(1), True, trace_pos, next_fail
    is_wipe, new_stack, need_more = _outcome(strategy, trace_mode, k, epoch, trace_pos, stack_traj,
                                             wipe_index, trace_stack, trace_wipe)
    if need_more:
        out[R_NEED_MORE] = 1.0
        return is_wipe, new_stack, need_more, trace_pos, next_fail
    if trace_mode:
        trace_pos += 1
        next_fail = trace_times[trace_pos] if trace_pos < trace_times.shape[0] else np.inf
    return is_wipe, new_stack, need_more, trace_pos, next_fail


@kernel
def _next_failure(model, fail_time, k, groups, follow_live, scale, shape, group_scale, epoch_start, cum):
    """Time of the next failure after one at ``fail_time`` (``k`` groups down in the epoch).

    System renewal: a fresh Weibull interval, stretched by ``N / (N - k)`` when the rate
    follows the live groups.  Group clocks: the next order statistic of the ``N``
    i.i.d. Weibull failure times of the epoch, drawn as ``scale * E^(1/k)`` from the
    order statistics ``E`` of unit exponentials (Renyi's representation: the spacings
    are ``Exp(1) / (number still live)``).  Returns ``(time, cum)``.
    """
    if model == MODEL_SYSTEM_RENEWAL:
        frac = (groups - k) / groups if follow_live else 1.0
        if frac <= 0.0:
            return np.inf, cum
        return fail_time + _weibull(scale, shape) / frac, cum
    live = groups - k
    if live <= 0:
        return np.inf, cum
    cum += -math.log(1.0 - np.random.random()) / live
    return epoch_start + group_scale * cum ** (1.0 / shape), cum


@kernel
def run_kernel(fparams, iparams, stack_traj, wipe_index, trace_times, trace_stack, trace_wipe):
    """Simulate one training run; return the ``R_*`` statistics.

    ``stack_traj[e, k]`` is the stack number after ``k`` failures of restart epoch ``e``
    and ``wipe_index[e]`` the 1-based failure that wipes epoch ``e`` out (``-1``:
    never).  For ``STRATEGY_REP`` ``stack_traj`` has one element holding ``r``.  In
    trace mode the ``i``-th failure of the trace has outcome ``trace_wipe[i]`` (1 =
    wipe-out) and, when masked, stack number ``trace_stack[i]``.  When the pool of
    epochs runs out the kernel stops with ``R_NEED_MORE = 1``; the caller extends the
    pool (earlier epochs unchanged) and runs again with the same seed.
    """
    t_layer = fparams[F_LAYER_COMPUTE]
    t_ar = fparams[F_ALLREDUCE]
    t_shrink = fparams[F_SHRINK]
    t_ctrl = fparams[F_CONTROLLER]
    t_restart = fparams[F_RESTART]
    t_save = fparams[F_SAVE]
    period = fparams[F_PERIOD]
    shape = fparams[F_SHAPE]
    sd = fparams[F_JITTER]
    max_wall = fparams[F_MAX_WALL]
    patch_layers = fparams[F_PATCH_LAYERS]
    max_failures = fparams[F_MAX_FAILURES]
    steps = iparams[I_STEPS]
    groups = iparams[I_GROUPS]
    strategy = iparams[I_STRATEGY]
    follow_live = iparams[I_RATE_FOLLOWS_LIVE] == 1
    carry = iparams[I_CARRY] == 1
    trace_mode = iparams[I_TRACE] == 1
    model = iparams[I_FAILURE_MODEL]
    scale = fparams[F_MTBF] / math.gamma(1.0 + 1.0 / shape)
    # group clocks: each group's mean time to failure is N * m
    group_scale = groups * scale
    np.random.seed(iparams[I_SEED])

    out = np.zeros(N_RESULTS)
    n_trace = trace_times.shape[0]
    spare = strategy == STRATEGY_SPARE
    base_stack = np.int64(stack_traj[0, 0]) if strategy == STRATEGY_REP else np.int64(1)

    t = 0.0
    committed = 0                # steps covered by the last checkpoint
    progress = 0                 # steps done (committed + pending)
    since_ckpt = 0.0             # seconds of progress since the last checkpoint
    pend_useful = 0.0            # step time not yet protected by a checkpoint
    pend_overhead = 0.0
    epoch = 0
    k = 0                        # failures in the current epoch (live groups: N - k)
    stack = base_stack
    next_stack = base_stack
    trace_pos = 0
    epoch_start = 0.0
    cum = 0.0
    if trace_mode:
        next_fail = trace_times[0] if n_trace > 0 else np.inf
    else:
        next_fail, cum = _next_failure(model, 0.0, 0, groups, follow_live, scale, shape, group_scale, 0.0, 0.0)

    while progress < steps:
        if t > max_wall:
            break
        # ------------------------------------------------------------ one step
        step_start = t
        comp = stack * t_layer * _jitter(sd)
        ar = t_ar * _jitter(sd)
        end = t + comp + ar
        overhead = 0.0
        wiped = False
        fail_time = 0.0
        while next_fail < end:
            fail_time = next_fail
            k += 1
            is_wipe, new_stack, need_more, trace_pos, next_fail = _record_failure(
                out, strategy, trace_mode, k, epoch, trace_pos, stack_traj, wipe_index, trace_stack, trace_wipe,
                trace_times, next_fail, max_failures)
            if need_more:
                return out
            if is_wipe:
                wiped = True
                break
            out[R_MASKED] += 1.0
            if new_stack > next_stack:
                next_stack = new_stack
            # detected at the all-reduce: patch compute (SPARe), controller, shrink
            cost = t_shrink * _jitter(sd)
            if spare:
                cost += t_ctrl * _jitter(sd) + patch_layers * t_layer * _jitter(sd)
            ar_start = end - ar
            if fail_time >= ar_start:
                # the all-reduce timed out: its elapsed part is lost and it is redone
                overhead += (fail_time - ar_start) + cost
                end = fail_time + cost + ar
            else:
                overhead += cost
                end += cost
            if not trace_mode:
                next_fail, cum = _next_failure(model, fail_time, k, groups, follow_live, scale, shape,
                                               group_scale, epoch_start, cum)
        out[R_STACK_STEPS] += stack
        out[R_STEPS_EXECUTED] += 1.0
        if wiped:
            out[R_REWORK] += pend_useful + pend_overhead + (fail_time - step_start)
            t = fail_time
        else:
            t = end
            progress += 1
            pend_useful += comp + ar
            pend_overhead += overhead
            since_ckpt += end - step_start
            stack = next_stack
            if progress >= steps:
                break
            if since_ckpt < period:
                continue
            # ----------------------------------------------------- checkpoint
            save_start = t
            save_end = t + t_save * _jitter(sd)
            while next_fail < save_end:
                fail_time = next_fail
                k += 1
                is_wipe, new_stack, need_more, trace_pos, next_fail = _record_failure(
                    out, strategy, trace_mode, k, epoch, trace_pos, stack_traj, wipe_index, trace_stack, trace_wipe,
                    trace_times, next_fail, max_failures)
                if need_more:
                    return out
                if is_wipe:
                    wiped = True
                    break
                out[R_MASKED] += 1.0
                if new_stack > stack:
                    stack = new_stack
                    next_stack = new_stack
                # no step to patch: only the shrink (and the controller's decision)
                save_end += t_shrink * _jitter(sd)
                if spare:
                    save_end += t_ctrl * _jitter(sd)
                if not trace_mode:
                    next_fail, cum = _next_failure(model, fail_time, k, groups, follow_live, scale, shape,
                                                   group_scale, epoch_start, cum)
            if wiped:
                out[R_CHECKPOINT] += fail_time - save_start
                out[R_REWORK] += pend_useful + pend_overhead
                t = fail_time
            else:
                out[R_CHECKPOINT] += save_end - save_start
                out[R_CHECKPOINTS] += 1.0
                out[R_USEFUL] += pend_useful
                out[R_OVERHEAD] += pend_overhead
                pend_useful = 0.0
                pend_overhead = 0.0
                since_ckpt = 0.0
                committed = progress
                t = save_end
                continue
        # ------------------------------------------- wipe-out: global restart(s)
        pend_useful = 0.0
        pend_overhead = 0.0
        since_ckpt = 0.0
        progress = committed
        restart_from = t
        first_restart = True
        while True:
            out[R_RESTARTS] += 1.0
            epoch += 1
            k = 0
            stack = base_stack
            next_stack = base_stack
            if not trace_mode and (first_restart or model == MODEL_GROUP_CLOCKS):
                if model == MODEL_SYSTEM_RENEWAL:
                    # the wipe-out failure is a renewal point; every group is back
                    next_fail = restart_from + _weibull(scale, shape)
                elif carry:
                    # group clocks restart with the restart: failures inside it stay down
                    epoch_start = restart_from
                    cum = 0.0
                    next_fail, cum = _next_failure(model, restart_from, 0, groups, follow_live, scale, shape,
                                                   group_scale, epoch_start, cum)
                else:
                    # group clocks restart with training: no failure inside the restart
                    next_fail = np.inf
            first_restart = False
            restart_end = restart_from + t_restart * _jitter(sd)
            out[R_RESTART] += restart_end - restart_from
            again = False
            while next_fail < restart_end:
                fail_time = next_fail
                if not carry:
                    # absorbed: the restart replaces the failed node
                    out[R_FAILURES] += 1.0
                    out[R_ABSORBED] += 1.0
                    if out[R_FAILURES] > max_failures:
                        out[R_CAPPED] = 1.0
                        return out
                    if trace_mode:
                        trace_pos += 1
                        next_fail = trace_times[trace_pos] if trace_pos < n_trace else np.inf
                    else:
                        next_fail = fail_time + _weibull(scale, shape)
                    continue
                # carried: the group stays down; its outcome holds when training resumes
                k += 1
                is_wipe, new_stack, need_more, trace_pos, next_fail = _record_failure(
                    out, strategy, trace_mode, k, epoch, trace_pos, stack_traj, wipe_index, trace_stack, trace_wipe,
                    trace_times, next_fail, max_failures)
                if need_more:
                    return out
                if not trace_mode:
                    next_fail, cum = _next_failure(model, fail_time, k, groups, follow_live, scale, shape,
                                                   group_scale, epoch_start, cum)
                if is_wipe:
                    again = True
                    break
                out[R_MASKED] += 1.0
                if new_stack > stack:
                    stack = new_stack
                    next_stack = new_stack
            if again:
                # the job would resume short of a whole shard type: restart once more
                restart_from = restart_end
                if restart_from > max_wall:
                    t = restart_from
                    break
                continue
            t = restart_end
            if model == MODEL_GROUP_CLOCKS and not trace_mode and not carry:
                epoch_start = t
                cum = 0.0
                next_fail, cum = _next_failure(model, t, 0, groups, follow_live, scale, shape, group_scale,
                                               epoch_start, cum)
            break
    out[R_WALL] = t
    out[R_USEFUL] += pend_useful
    out[R_OVERHEAD] += pend_overhead
    out[R_FINISHED] = 1.0 if progress >= steps else 0.0
    out[R_EPOCHS_USED] = epoch + 1
    return out
