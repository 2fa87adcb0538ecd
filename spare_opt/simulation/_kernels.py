"""Numba kernel of the time-to-train discrete-event simulation (private).

The public API is :func:`spare_opt.simulate`; this module holds only the
jitted event loop, which takes flat arrays and scalars.  It is imported lazily (never
by ``import spare_opt``) because the first call compiles it (``cache=True`` keeps the
compiled code on disk for later processes when the folder is writable).

Layout of the parameter arrays
------------------------------
``fparams`` (float64) and ``iparams`` (int64) are indexed by the ``F_*`` and ``I_*``
constants below; :func:`spare_opt.simulation._runs._pack` fills them.  The kernel
returns a float64 array indexed by the ``R_*`` constants.  Inside, the state of the
failure process and of the restart epoch lives in two small arrays indexed by ``C_*``
and ``E_*``, shared by the event loop and :func:`_phase_events`, the one function
that handles an event (a failure, or a repaired group rejoining) whatever phase (step,
checkpoint save, restart) it lands in.

Outcomes
--------
What an event does to the job is computed before the run: synthetic failures read it
from per-restart-epoch trajectories (``stack_traj`` / ``cost_traj`` / ``wipe_index``),
events given up front (a trace, or events drawn from a fitted failure model) carry it
in their row of ``events`` (columns ``EV_*``): kind (failure or rejoin), wipe-out
flag, and the *step cost* ``sigma`` (compute of a step in layers: the stack number
``S`` at ``m = 1``, ``L*/m`` with ``m`` micro-batches) and stack number after it.
"""

import math

import numpy as np
from .._core.jit import kernel

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
F_EVENTS_HORIZON = 13    # events mode with I_EVENTS_OPEN: every event up to this time is given
N_FPARAMS = 14

# ------------------------------------------------------------------ int parameters
I_STEPS = 0              # training steps to complete
I_GROUPS = 1             # DP groups N
I_STRATEGY = 2           # STRATEGY_* below
I_RATE_FOLLOWS_LIVE = 3  # 1: failure rate proportional to the live fraction
I_CARRY = 4              # 1: failures during a restart stay down when training resumes
I_SEED = 5               # seed of the kernel's random stream
I_TRACE = 6              # 1: events mode: times and outcomes come from ``events`` (not Weibull)
I_FAILURE_MODEL = 7      # MODEL_* below
I_EVENTS_OPEN = 8        # events mode: 1 when events after F_EVENTS_HORIZON exist but are not given yet
N_IPARAMS = 9

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
R_FINISHED = 11          # 1.0 when all steps completed by F_MAX_WALL
R_EPOCHS_USED = 12       # trajectories consumed (synthetic failures)
R_NEED_MORE = 13         # 1.0 when the trajectory pool ran out (rerun with more)
R_CHECKPOINTS = 14       # checkpoints completed
R_FAILURES = 15          # failures that struck (masked + wipe-outs + absorbed)
R_CAPPED = 16            # 1.0 when the run stopped at F_MAX_FAILURES failures (the caller refuses it)
R_COST_STEPS = 17        # sum over executed steps of the step cost sigma (layers of compute)
R_REJOINS = 18           # repaired groups' rejoin events applied
N_RESULTS = 19

# ------------------------------------------------------------ events (events mode)
EV_TIME = 0              # seconds: a failure's time, or the time a healed group is ready to rejoin
EV_KIND = 1              # KIND_* below
EV_WIPE = 2              # 1.0: this failure wipes out (never for a rejoin)
EV_COST = 3              # step cost sigma after the event (when not a wipe-out)
EV_STACK = 4             # stack number after the event (when not a wipe-out)
N_EV = 5

KIND_FAILURE = 0
KIND_REJOIN = 1

# ------------------------------------------------------------- event-loop state
# Phases of a run; an event is handled by the phase it lands in (_phase_events).
PHASE_STEP = 0           # compute and all-reduce of one step
PHASE_SAVE = 1           # a checkpoint save
PHASE_RESTART = 2        # a global restart

# How a phase ended.
ENDED = 0                # ran to its end (failures, if any, were masked or absorbed)
WIPED = 1                # a wipe-out cut it short
NEED_MORE = 2            # the trajectory pool ran out (R_NEED_MORE is set)

# The failure process (float64 array ``clock``): its state, then its scales; then the
# step cost, the float twin of E_STACK / E_NEXT_STACK.
C_NEXT_FAIL = 0          # time of the next event (inf: none)
C_CUM = 1                # group clocks: sum of the exponential spacings drawn this epoch
C_EPOCH_START = 2        # group clocks: when the clocks last restarted
C_SCALE = 3              # Weibull scale of the system renewal process, m / Gamma(1 + 1/k)
C_GROUP_SCALE = 4        # Weibull scale of one group's clock, N m / Gamma(1 + 1/k)
C_COST = 5               # step cost of the step running (or of the next one, between steps)
C_NEXT_COST = 6          # step cost from the next step on (set by events inside a step)
N_CLOCK = 7

# The restart epoch (int64 array ``epoch_state``).
E_FAILED = 0             # failures so far in this epoch, k (live groups: N - k)
E_EPOCH = 1              # restart epochs completed (index into the trajectory pool)
E_TRACE_POS = 2          # events mode: index of the next event
E_STACK = 3              # stack number of the step running (or of the next one, between steps)
E_NEXT_STACK = 4         # stack number from the next step on (raised by failures inside a step)
N_EPOCH_STATE = 5


# ------------------------------------------------------------- the random stream
# The kernel's random numbers are numba's np.random stream (the one it drew from before),
# produced in blocks: the Mersenne Twister MT19937 seeded with init_genrand (numba's
# np.random.seed), doubles of 53 bits from two 32-bit words, normals by Marsaglia's polar
# method with the second value of each pair kept for the next call.  A stream is the
# tuple ``(words, doubles, state, ahead)``: the generator's 624 words, the block of 312
# doubles they give (then, at RNG_GAUSS, the normal kept), the ``S_*`` entries below, and
# normals of the same stream drawn before (:func:`normals_ahead`, once per seed for all
# the runs of that seed; empty for a fresh stream), which come first: the other three
# go on from where the drawing of them left off.  Only normals can come from ``ahead``
# (events mode, whose only random numbers are the jitters).  Drawing from a block costs
# a load where np.random, one word at a time, checks and tempers each word (about 4x
# faster per normal; the numbers are the same, tests/test_random_stream.py).
RNG_WORDS = 624          # MT19937 state words (n)
RNG_SHIFT = 397          # MT19937 middle word (m)
RNG_DOUBLES = RNG_WORDS // 2
RNG_GAUSS = RNG_DOUBLES  # in ``doubles``: the second normal of the last pair
S_POS = 0                # in ``state``: next double of the block (RNG_DOUBLES: draw a block)
S_HAS_GAUSS = 1          # in ``state``: 1 when ``doubles[RNG_GAUSS]`` is the next normal
S_AHEAD = 2              # in ``state``: next normal of ``ahead`` (its size: none left)
S_SEED = 3               # in ``state``: the seed that started the stream (its low 32 bits)
N_STREAM_STATE = 4


@kernel
def _stream(seed):
    """A random stream seeded as ``np.random.seed(seed)`` (the low 32 bits of ``seed``)."""
    words = np.empty(RNG_WORDS, dtype=np.uint32)
    value = np.uint64(seed) & np.uint64(0xFFFFFFFF)
    for pos in range(RNG_WORDS):
        words[pos] = np.uint32(value)
        value = (np.uint64(1812433253) * (value ^ (value >> np.uint64(30))) + np.uint64(pos + 1)) \
            & np.uint64(0xFFFFFFFF)
    doubles = np.zeros(RNG_DOUBLES + 1)
    state = np.zeros(N_STREAM_STATE, dtype=np.int64)
    state[S_POS] = RNG_DOUBLES
    state[S_SEED] = np.int64(np.uint64(seed) & np.uint64(0xFFFFFFFF))
    return words, doubles, state, np.zeros(0)


@kernel
def normals_ahead(seed, count):
    """The first ``count`` normals (rounded up to pairs) of the stream of ``seed``, and the stream after them.

    Returns ``(ahead, words, doubles, state)``: ``ahead`` (float64, standard normals,
    as ``np.random.normal(0, 1)`` after ``np.random.seed(seed)``), then the state that
    :func:`run_kernel_from` continues from once they are used up.
    """
    words, doubles, state, _ = _stream(seed)
    pairs = (max(count, 0) + 1) // 2
    ahead = np.empty(2 * pairs)
    pos = RNG_DOUBLES
    done = 0
    while done < pairs:
        if pos >= RNG_DOUBLES:
            _refill(words, doubles)
            pos = 0
        u1 = doubles[pos]
        pos += 1
        if pos >= RNG_DOUBLES:
            _refill(words, doubles)
            pos = 0
        accepted, now, kept = _polar(u1, doubles[pos])
        pos += 1
        if accepted:
            ahead[2 * done] = now
            ahead[2 * done + 1] = kept
            done += 1
    state[S_POS] = pos
    return ahead, words, doubles, state


@kernel
def _refill(words, doubles):
    """Advance MT19937 by 624 words (its twist) and turn them into the next 312 doubles."""
    upper = np.uint32(0x80000000)
    lower = np.uint32(0x7FFFFFFF)
    matrix = np.uint32(0x9908B0DF)
    one = np.uint32(1)
    for i in range(RNG_WORDS - RNG_SHIFT):
        y = (words[i] & upper) | (words[i + 1] & lower)
        words[i] = words[i + RNG_SHIFT] ^ (y >> one) ^ (matrix * (y & one))
    for i in range(RNG_WORDS - RNG_SHIFT, RNG_WORDS - 1):
        y = (words[i] & upper) | (words[i + 1] & lower)
        words[i] = words[i + RNG_SHIFT - RNG_WORDS] ^ (y >> one) ^ (matrix * (y & one))
    y = (words[RNG_WORDS - 1] & upper) | (words[0] & lower)
    words[RNG_WORDS - 1] = words[RNG_SHIFT - 1] ^ (y >> one) ^ (matrix * (y & one))
    for i in range(RNG_DOUBLES):
        a = words[2 * i]
        a ^= a >> np.uint32(11)
        a ^= (a << np.uint32(7)) & np.uint32(0x9D2C5680)
        a ^= (a << np.uint32(15)) & np.uint32(0xEFC60000)
        a ^= a >> np.uint32(18)
        b = words[2 * i + 1]
        b ^= b >> np.uint32(11)
        b ^= (b << np.uint32(7)) & np.uint32(0x9D2C5680)
        b ^= (b << np.uint32(15)) & np.uint32(0xEFC60000)
        b ^= b >> np.uint32(18)
        doubles[i] = ((a >> np.uint32(5)) * 67108864.0 + (b >> np.uint32(6))) / 9007199254740992.0


@kernel
def _uniform(rng):
    """The next double in [0, 1) of ``rng``: ``np.random.random()``."""
    words, doubles, state = rng[0], rng[1], rng[2]
    pos = state[S_POS]
    if pos >= RNG_DOUBLES:
        _refill(words, doubles)
        pos = 0
    state[S_POS] = pos + 1
    return doubles[pos]


@kernel
def _polar(u1, u2):
    """Marsaglia's polar method on two uniforms: ``(accepted, normal now, normal kept)``."""
    x1 = 2.0 * u1 - 1.0
    x2 = 2.0 * u2 - 1.0
    r2 = x1 * x1 + x2 * x2
    if r2 < 1.0 and r2 != 0.0:
        f = math.sqrt(-2.0 * math.log(r2) / r2)
        return True, f * x2, f * x1
    return False, 0.0, 0.0


@kernel
def _normal(rng, loc, scale):
    """The next normal of ``rng``: ``np.random.normal(loc, scale)``."""
    doubles, state, ahead = rng[1], rng[2], rng[3]
    if state[S_AHEAD] < ahead.size:
        state[S_AHEAD] += 1
        return loc + scale * ahead[state[S_AHEAD] - 1]
    if state[S_HAS_GAUSS] == 1:
        state[S_HAS_GAUSS] = 0
        return loc + scale * doubles[RNG_GAUSS]
    while True:
        u1 = _uniform(rng)
        accepted, now, kept = _polar(u1, _uniform(rng))
        if accepted:
            break
    doubles[RNG_GAUSS] = kept
    state[S_HAS_GAUSS] = 1
    return loc + scale * now


@kernel
def _jitter(rng, sd):
    if sd <= 0.0:
        return 1.0
    value = _normal(rng, 1.0, sd)
    return value if value > 0.0 else 0.0


@kernel
def _weibull(rng, scale, shape):
    # Inverse transform: X = scale * (-ln U)^(1/k), mean scale * Gamma(1 + 1/k).
    u = _uniform(rng)
    return scale * (-math.log(1.0 - u)) ** (1.0 / shape)


@kernel
def _outcome(strategy, k, epoch, stack_traj, cost_traj, wipe_index):
    """Synthetic failures: (wipe-out?, stack number, step cost after it, pool exhausted?)."""
    if strategy == STRATEGY_CKPT:
        return True, np.int64(1), 1.0, False
    if epoch >= wipe_index.shape[0]:
        return False, np.int64(1), 1.0, True
    is_wipe = wipe_index[epoch] == k
    if strategy == STRATEGY_REP:
        return is_wipe, np.int64(stack_traj[0, 0]), cost_traj[0, 0], False
    column = k if k < stack_traj.shape[1] else stack_traj.shape[1] - 1
    return is_wipe, np.int64(stack_traj[epoch, column]), cost_traj[epoch, column], False


@kernel
def _next_failure(rng, model, fail_time, k, groups, follow_live, scale, shape, group_scale, epoch_start, cum):
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
        return fail_time + _weibull(rng, scale, shape) / frac, cum
    live = groups - k
    if live <= 0:
        return np.inf, cum
    cum += -math.log(1.0 - _uniform(rng)) / live
    return epoch_start + group_scale * cum ** (1.0 / shape), cum


@kernel
def _draw_next_failure(rng, fail_time, fparams, iparams, clock, epoch_state):
    """Draw the next synthetic failure after one at ``fail_time`` into ``clock``."""
    clock[C_NEXT_FAIL], clock[C_CUM] = _next_failure(
        rng, iparams[I_FAILURE_MODEL], fail_time, epoch_state[E_FAILED], iparams[I_GROUPS],
        iparams[I_RATE_FOLLOWS_LIVE] == 1, clock[C_SCALE], fparams[F_SHAPE], clock[C_GROUP_SCALE],
        clock[C_EPOCH_START], clock[C_CUM])


@kernel
def _first_event(events, fparams, iparams, clock):
    """Events mode: point ``clock`` at the first event (or the horizon, or nothing)."""
    if events.shape[0] > 0:
        clock[C_NEXT_FAIL] = events[0, EV_TIME]
    elif iparams[I_EVENTS_OPEN] == 1:
        clock[C_NEXT_FAIL] = fparams[F_EVENTS_HORIZON]
    else:
        clock[C_NEXT_FAIL] = np.inf


@kernel
def _next_event(events, fparams, iparams, clock, epoch_state):
    """Events mode: move on to the next event (past the last one: the horizon when more may come)."""
    epoch_state[E_TRACE_POS] += 1
    pos = epoch_state[E_TRACE_POS]
    if pos < events.shape[0]:
        clock[C_NEXT_FAIL] = events[pos, EV_TIME]
    elif iparams[I_EVENTS_OPEN] == 1:
        clock[C_NEXT_FAIL] = fparams[F_EVENTS_HORIZON]
    else:
        clock[C_NEXT_FAIL] = np.inf


@kernel
def _restart_group_clocks(rng, at, fparams, iparams, clock, epoch_state):
    """Group clocks: restart every clock at ``at`` and draw the epoch's first failure."""
    clock[C_EPOCH_START] = at
    clock[C_CUM] = 0.0
    _draw_next_failure(rng, at, fparams, iparams, clock, epoch_state)


@kernel
def _reconfigured(rng, end, spare, fparams):
    """``end`` lengthened by a communicator change (shrink or grow) and, for SPARe, the controller.

    Each duration is jittered and added in turn (the order of the additions is part of
    the exact semantics).
    """
    sd = fparams[F_JITTER]
    end += fparams[F_SHRINK] * _jitter(rng, sd)
    if spare:
        end += fparams[F_CONTROLLER] * _jitter(rng, sd)
    return end


@kernel
def _phase_events(rng, phase, end, ar, fparams, iparams, clock, epoch_state, out, stack_traj, cost_traj,
                  wipe_index, events):
    """Handle every event that lands in a phase ending at ``end``, in time order.

    The one place where an event is counted, its outcome looked up and its cost
    charged.  The stack number and step cost after an event are those of the job
    from then on (the last event handled sets them).  What a masked failure does
    depends on ``phase``:

    * ``PHASE_STEP``: detected at the all-reduce, it costs the shrink (SPARe: also the
      controller and the patch compute) before the all-reduce, the last ``ar`` seconds
      of the step; one that lands in the all-reduce also loses its elapsed part, which
      is redone.  The new step cost applies from the next step.
    * ``PHASE_SAVE``: no step to patch; the save is lengthened by the shrink (SPARe:
      and the controller) and the new step cost applies at once.
    * ``PHASE_RESTART``: without ``I_CARRY`` the restart absorbs the failure (counted
      only); with it the group stays down: the new step cost holds when training
      resumes and a wipe-out means one more restart after this one (the restart runs on
      to its end, so under system renewal the next failure is drawn from it).

    A rejoin (events mode: a repaired group, healed, ready at the event's time) joins
    at the next step boundary: in a step, the step is lengthened at its end by the
    communicator change (shrink, SPARe: and controller time; charged as overhead) and
    the new step cost applies from the next step; in a save, the save is lengthened
    likewise and the cost applies at once; in a restart it is free.

    Returns ``(status, end, overhead, fail_time)``: ``status`` is ``ENDED``, ``WIPED``
    or ``NEED_MORE`` (also when the run passes ``F_MAX_FAILURES`` failures, with
    ``R_CAPPED`` set: the caller refuses the run); ``end`` the phase's end, lengthened by masking costs; ``overhead``
    the masking cost charged to a step (0 for other phases); ``fail_time`` the time of
    the last failure handled (of the wipe-out when ``WIPED``).
    """
    strategy = iparams[I_STRATEGY]
    trace_mode = iparams[I_TRACE] == 1
    spare = strategy == STRATEGY_SPARE
    sd = fparams[F_JITTER]
    overhead = 0.0
    rejoin_cost = 0.0
    fail_time = 0.0
    while clock[C_NEXT_FAIL] < end:
        at = clock[C_NEXT_FAIL]
        pos = epoch_state[E_TRACE_POS]
        if trace_mode and pos >= events.shape[0]:
            # the horizon of open-ended events: the caller must give more
            out[R_NEED_MORE] = 1.0
            return NEED_MORE, end, overhead, fail_time
        if trace_mode and events[pos, EV_KIND] == KIND_REJOIN:
            _next_event(events, fparams, iparams, clock, epoch_state)
            out[R_REJOINS] += 1.0
            new_stack = np.int64(events[pos, EV_STACK])
            new_cost = events[pos, EV_COST]
            epoch_state[E_FAILED] -= 1
            epoch_state[E_NEXT_STACK] = new_stack
            clock[C_NEXT_COST] = new_cost
            if phase == PHASE_STEP:
                rejoin_cost = _reconfigured(rng, rejoin_cost, spare, fparams)
            else:
                epoch_state[E_STACK] = new_stack
                clock[C_COST] = new_cost
                if phase == PHASE_SAVE:
                    end = _reconfigured(rng, end, spare, fparams)
            continue
        fail_time = at
        if phase == PHASE_RESTART and iparams[I_CARRY] != 1:
            # absorbed: the restart replaces the failed node
            out[R_FAILURES] += 1.0
            out[R_ABSORBED] += 1.0
            if out[R_FAILURES] > fparams[F_MAX_FAILURES]:  # the bound of the event loop
                out[R_CAPPED] = 1.0
                return NEED_MORE, end, overhead, fail_time
            if trace_mode:
                _next_event(events, fparams, iparams, clock, epoch_state)
            else:
                clock[C_NEXT_FAIL] = fail_time + _weibull(rng, clock[C_SCALE], fparams[F_SHAPE])
            continue
        epoch_state[E_FAILED] += 1
        out[R_FAILURES] += 1.0
        if out[R_FAILURES] > fparams[F_MAX_FAILURES]:  # the bound of the event loop
            out[R_CAPPED] = 1.0
            return NEED_MORE, end, overhead, fail_time
        if trace_mode:
            is_wipe = events[pos, EV_WIPE] == 1.0
            new_stack = np.int64(events[pos, EV_STACK])
            new_cost = events[pos, EV_COST]
            _next_event(events, fparams, iparams, clock, epoch_state)
        else:
            is_wipe, new_stack, new_cost, need_more = _outcome(strategy, epoch_state[E_FAILED],
                                                               epoch_state[E_EPOCH], stack_traj, cost_traj,
                                                               wipe_index)
            if need_more:
                out[R_NEED_MORE] = 1.0
                return NEED_MORE, end, overhead, fail_time
        if is_wipe:
            # a wipe-out in a step or save starts a restart at once, which sets the clocks;
            # one inside a restart does not stop it, so the failure process goes on
            if phase == PHASE_RESTART and not trace_mode:
                _draw_next_failure(rng, fail_time, fparams, iparams, clock, epoch_state)
            return WIPED, end, overhead, fail_time
        out[R_MASKED] += 1.0
        epoch_state[E_NEXT_STACK] = new_stack
        clock[C_NEXT_COST] = new_cost
        if phase == PHASE_STEP:
            cost = fparams[F_SHRINK] * _jitter(rng, sd)
            if spare:
                cost += (fparams[F_CONTROLLER] * _jitter(rng, sd)
                         + fparams[F_PATCH_LAYERS] * fparams[F_LAYER_COMPUTE] * _jitter(rng, sd))
            ar_start = end - ar
            if fail_time >= ar_start:
                # the all-reduce timed out: its elapsed part is lost and it is redone
                overhead += (fail_time - ar_start) + cost
                end = fail_time + cost + ar
            else:
                overhead += cost
                end += cost
        else:
            epoch_state[E_STACK] = new_stack
            clock[C_COST] = new_cost
            if phase == PHASE_SAVE:
                end = _reconfigured(rng, end, spare, fparams)
        if not trace_mode:
            _draw_next_failure(rng, fail_time, fparams, iparams, clock, epoch_state)
    if rejoin_cost > 0.0:
        # the groups that became ready during the step join at its end
        overhead += rejoin_cost
        end += rejoin_cost
    return ENDED, end, overhead, fail_time


@kernel
def run_kernel(fparams, iparams, stack_traj, cost_traj, wipe_index, events):
    """Simulate one training run; return the ``R_*`` statistics.

    Synthetic failures: ``stack_traj[e, k]`` and ``cost_traj[e, k]`` are the stack
    number and step cost after ``k`` failures of restart epoch ``e`` and
    ``wipe_index[e]`` the 1-based failure that wipes epoch ``e`` out (``-1``: never).
    For ``STRATEGY_REP`` both trajectories have one element holding ``r``.  When the
    pool of epochs runs out the kernel stops with ``R_NEED_MORE = 1``; the caller
    extends the pool (earlier epochs unchanged) and runs again with the same seed.

    Events mode (``I_TRACE``): row ``i`` of ``events`` (columns ``EV_*``, sorted by
    time) is the ``i``-th event with its outcome; the trajectories are read only for
    the base stack number and cost (shape (1, 1)).  With ``I_EVENTS_OPEN`` the events
    after ``F_EVENTS_HORIZON`` are not given yet: a run that gets there stops with
    ``R_NEED_MORE = 1``, and the caller gives more events and runs again.

    The run alternates steps, checkpoint saves and global restarts; the events that
    land in each are handled by :func:`_phase_events`.  ``tests/naive_simulate.py``
    is a plain-Python statement of the same semantics.
    """
    return _simulate(fparams, iparams, stack_traj, cost_traj, wipe_index, events, _stream(iparams[I_SEED]))


@kernel
def run_kernel_from(fparams, iparams, stack_traj, cost_traj, wipe_index, events, ahead, words, doubles, state):
    """:func:`run_kernel` on the stream ``(ahead, words, doubles, state)`` of :func:`normals_ahead`.

    That stream must be the one of ``iparams[I_SEED]`` (the caller keeps it per seed);
    it is not changed (the run draws from a copy of its state and reads ``ahead``).
    ``ahead`` is read in events mode only, which draws normals alone; a synthetic run
    starts the stream of its seed afresh.
    """
    if iparams[I_TRACE] != 1 or (iparams[I_SEED] & 0xFFFFFFFF) != state[S_SEED]:  # not this stream's run
        return run_kernel(fparams, iparams, stack_traj, cost_traj, wipe_index, events)
    rng = (words.copy(), doubles.copy(), state.copy(), ahead)
    rng[2][S_AHEAD] = 0
    return _simulate(fparams, iparams, stack_traj, cost_traj, wipe_index, events, rng)


@kernel
def _simulate(fparams, iparams, stack_traj, cost_traj, wipe_index, events, rng):
    """:func:`run_kernel` drawing from the random stream ``rng``."""
    t_layer = fparams[F_LAYER_COMPUTE]
    t_ar = fparams[F_ALLREDUCE]
    t_restart = fparams[F_RESTART]
    t_save = fparams[F_SAVE]
    period = fparams[F_PERIOD]
    shape = fparams[F_SHAPE]
    sd = fparams[F_JITTER]
    max_wall = fparams[F_MAX_WALL]
    steps = iparams[I_STEPS]
    carry = iparams[I_CARRY] == 1
    trace_mode = iparams[I_TRACE] == 1
    model = iparams[I_FAILURE_MODEL]
    words, doubles, stream, ahead = rng
    n_ahead = ahead.size

    out = np.zeros(N_RESULTS)
    clock = np.zeros(N_CLOCK)
    clock[C_SCALE] = fparams[F_MTBF] / math.gamma(1.0 + 1.0 / shape)
    # group clocks: each group's mean time to failure is N * m
    clock[C_GROUP_SCALE] = iparams[I_GROUPS] * clock[C_SCALE]
    epoch_state = np.zeros(N_EPOCH_STATE, dtype=np.int64)
    # the fault-free stack number and step cost: r for replication, 1 otherwise
    base_stack = np.int64(stack_traj[0, 0]) if iparams[I_STRATEGY] == STRATEGY_REP else np.int64(1)
    base_cost = cost_traj[0, 0] if iparams[I_STRATEGY] == STRATEGY_REP else 1.0
    epoch_state[E_STACK] = base_stack
    epoch_state[E_NEXT_STACK] = base_stack
    clock[C_COST] = base_cost
    clock[C_NEXT_COST] = base_cost
    if trace_mode:
        _first_event(events, fparams, iparams, clock)
    else:
        _draw_next_failure(rng, 0.0, fparams, iparams, clock, epoch_state)

    t = 0.0
    committed = 0                # steps covered by the last checkpoint
    progress = 0                 # steps done (committed + pending)
    since_ckpt = 0.0             # seconds of progress since the last checkpoint
    pend_useful = 0.0            # step time not yet protected by a checkpoint
    pend_overhead = 0.0
    while progress < steps:
        if t > max_wall:
            break
        # ------------------------------------------------------------ one step
        step_start = t
        stack = epoch_state[E_STACK]
        cost = clock[C_COST]
        # The step's jitters (compute, then all-reduce): _jitter's draws, written out here
        # because a call that takes the stream's arrays costs more reference counting than
        # the draw itself.
        jitter_comp = 1.0
        jitter_ar = 1.0
        if sd > 0.0:
            for draw in range(2):
                next_ahead = stream[S_AHEAD]
                if next_ahead < n_ahead:
                    normal = ahead[next_ahead]
                    stream[S_AHEAD] = next_ahead + 1
                elif stream[S_HAS_GAUSS] == 1:
                    stream[S_HAS_GAUSS] = 0
                    normal = doubles[RNG_GAUSS]
                else:
                    pos = stream[S_POS]
                    while True:
                        if pos >= RNG_DOUBLES:
                            _refill(words, doubles)
                            pos = 0
                        u1 = doubles[pos]
                        pos += 1
                        if pos >= RNG_DOUBLES:
                            _refill(words, doubles)
                            pos = 0
                        accepted, normal, kept = _polar(u1, doubles[pos])
                        pos += 1
                        if accepted:
                            break
                    stream[S_POS] = pos
                    doubles[RNG_GAUSS] = kept
                    stream[S_HAS_GAUSS] = 1
                value = 1.0 + sd * normal
                if draw == 0:
                    jitter_comp = value if value > 0.0 else 0.0
                else:
                    jitter_ar = value if value > 0.0 else 0.0
        comp = cost * t_layer * jitter_comp
        ar = t_ar * jitter_ar
        end = t + comp + ar
        if clock[C_NEXT_FAIL] < end:
            status, end, overhead, fail_time = _phase_events(
                rng, PHASE_STEP, end, ar, fparams, iparams, clock, epoch_state, out, stack_traj, cost_traj,
                wipe_index, events)
            if status == NEED_MORE:
                return out
        else:  # no event lands in the step (most steps): what _phase_events returns then, without the call
            status, overhead, fail_time = ENDED, 0.0, 0.0
        out[R_STACK_STEPS] += stack
        out[R_COST_STEPS] += cost
        out[R_STEPS_EXECUTED] += 1.0
        if status == WIPED:
            out[R_REWORK] += pend_useful + pend_overhead + (fail_time - step_start)
            t = fail_time
        else:
            t = end
            progress += 1
            pend_useful += comp + ar
            pend_overhead += overhead
            since_ckpt += end - step_start
            epoch_state[E_STACK] = epoch_state[E_NEXT_STACK]
            clock[C_COST] = clock[C_NEXT_COST]
            if progress >= steps:
                break
            if since_ckpt < period:
                continue
            # ----------------------------------------------------- checkpoint
            save_start = t
            status, save_end, _, fail_time = _phase_events(
                rng, PHASE_SAVE, t + t_save * _jitter(rng, sd), 0.0, fparams, iparams, clock, epoch_state, out, stack_traj,
                cost_traj, wipe_index, events)
            if status == NEED_MORE:
                return out
            if status == WIPED:
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
            epoch_state[E_EPOCH] += 1
            epoch_state[E_FAILED] = 0
            epoch_state[E_STACK] = base_stack
            epoch_state[E_NEXT_STACK] = base_stack
            clock[C_COST] = base_cost
            clock[C_NEXT_COST] = base_cost
            if not trace_mode and (first_restart or model == MODEL_GROUP_CLOCKS):
                if model == MODEL_SYSTEM_RENEWAL:
                    # the wipe-out failure is a renewal point; every group is back
                    clock[C_NEXT_FAIL] = restart_from + _weibull(rng, clock[C_SCALE], shape)
                elif carry:
                    # group clocks restart with the restart: failures inside it stay down
                    _restart_group_clocks(rng, restart_from, fparams, iparams, clock, epoch_state)
                else:
                    # group clocks restart with training: no failure inside the restart
                    clock[C_NEXT_FAIL] = np.inf
            first_restart = False
            restart_end = restart_from + t_restart * _jitter(rng, sd)
            out[R_RESTART] += restart_end - restart_from
            status, _, _, _ = _phase_events(
                rng, PHASE_RESTART, restart_end, 0.0, fparams, iparams, clock, epoch_state, out, stack_traj, cost_traj,
                wipe_index, events)
            if status == NEED_MORE:
                return out
            if status == WIPED:
                # the job would resume short of a whole shard type: restart once more
                restart_from = restart_end
                if restart_from > max_wall:
                    t = restart_from
                    break
                continue
            t = restart_end
            if model == MODEL_GROUP_CLOCKS and not trace_mode and not carry:
                _restart_group_clocks(rng, t, fparams, iparams, clock, epoch_state)
            break
    out[R_WALL] = t
    out[R_USEFUL] += pend_useful
    out[R_OVERHEAD] += pend_overhead
    # the cap is tested before each step: a last step that ends beyond it does not finish the run
    out[R_FINISHED] = 1.0 if progress >= steps and t <= max_wall else 0.0
    out[R_EPOCHS_USED] = epoch_state[E_EPOCH] + 1
    return out
