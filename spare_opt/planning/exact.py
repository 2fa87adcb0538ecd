"""The exact reorder planner: the reference every fast path is tested against.

After a set of DP groups fails, :func:`plan_reorder` decides which live group contributes
each shard type to the all-reduce, the least all-reduce stack number ``S*`` that allows
it, and the new stack order of every live group, moving as few shard types as possible
into the computed layers.  It follows the three phases of the SPARe reorder controller
(Lee et al., ICML 2026, Sec. 4; ``docs/planner.md``):

1. *fixed check*: do the live groups' top ``S`` layers, in their current order, still
   cover every shard type?
2. *free search*: the least ``S*`` for which a b-matching gives every shard type one live
   holder with no group loaded above ``S*`` (maximum flow, Hall's theorem);
3. *min-move reorder*: among those b-matchings, one that moves the fewest shard types
   into a group's top ``S*`` layers (min-cost maximum flow), then the new orders.

With ``m > 1`` micro-batches per shard type (fractional stacking, ``docs/planner.md``
"Micro-batches"), the same three phases run on a network with capacities in
micro-batches: the least largest load ``L*`` by maximum flows, then a min-cost flow that
keeps as many micro-batches as possible with their previous contributor.

Graph algorithms come from well-kept libraries: Dinic's maximum flow of
``scipy.sparse.csgraph`` for the feasibility tests and the min-cost flow of OR-Tools
(``ortools.graph.python.min_cost_flow``) for the min-move phase.
"""

import numpy as np

from .._core import validation as check
from .._core.errors import FailureSetError, LayoutError, ParameterError, PlanError, SolverError
from .failure_sets import normalise_groups
from .plan import (
    MASKED,
    WIPE_OUT,
    Plan,
    _derived_order,
    _holders_by_layer,
    _split_layers,
    check_micro_batches,
    lower_bound,
)
from ..layouts.layout import check_layout

__all__ = ["plan_reorder", "least_stack_number", "least_load", "stack_number_certificate"]


def plan_reorder(layout, failed, *, order=None, stack_number=1, mid_step=(), micro_batches=1, split=None):
    """Plan the reorder after a set of DP groups has failed.

    Parameters
    ----------
    layout : Layout
        The stack layout, ``N`` DP groups with redundancy ``r``.
    failed : iterable of int
        Every group that has failed so far (the cumulative failure set ``F``,
        ``k = |F|``), ids in ``[0, N)``, each at most once, in any order.
    order : array_like of int, shape (N, r), optional
        The current stack order of every group (default: ``layout.stacks``, the
        fault-free order).  Row ``g`` of a live group must be a permutation of
        ``layout.stacks[g]``; rows of failed groups are ignored (``-1`` is customary).
    stack_number : int, default 1
        The current all-reduce stack number ``S`` in ``[1, r]``: every live group
        computes the top ``S`` layers of its current order.
    mid_step : iterable of int, default ()
        The groups of ``failed`` that failed during the current step, after computing
        it but before its all-reduce.  Empty when the failures happened between steps.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.  ``m = 1`` is the paper's model, planned
        exactly as described below; ``m > 1`` is described under "Micro-batches".
    split : array_like of int, shape (N, m), optional
        Only at ``m > 1``: the previous plan, ``split[t, j]`` the group that computed
        micro-batch ``j`` of shard type ``t`` (a holder of ``t``, live or failed).
        Default: the fault-free split, every micro-batch of ``t`` on the group holding
        ``t`` at layer 0.  At ``m > 1`` the previous plan is ``split`` alone:
        ``order`` and ``stack_number`` must keep their defaults.

    Returns
    -------
    Plan
        ``status``
            ``"wipe-out"`` when some shard type has no live holder, else ``"masked"``.
        ``stack_number``
            ``S*``, the least stack number such that every shard type can be given to
            one live holder with no live group given more than ``S*`` shard types
            (``None`` on a wipe-out).  It can be below the current ``S`` when the
            caller's ``S`` is larger than needed.
        ``lower_bound``
            ``c(k) = ceil(N / (N - k))``; ``None`` when ``k = N``.
        ``failed``
            The failure set, sorted, int32.
        ``lost_shards``
            int32 shard types with no live holder; non-empty exactly on a wipe-out.
        ``assignment``
            int32 ``(N,)``: ``assignment[t]`` is the live group that contributes shard
            type ``t``.  No live group is given more than ``S*`` types, and the
            number of types given outside their group's top ``S*`` layers of the
            current ``order`` is the least possible among such assignments.
        ``order``
            int32 ``(N, r)``, the new stack orders, ``-1`` rows for failed groups.  A
            live group whose assigned types all lie in its current top ``S*`` keeps
            its row unchanged.  Otherwise its assigned types already in the top
            ``S*`` stay at their layers; each assigned type from below the top
            ``S*`` (taken in current order) replaces an unassigned type of the top
            ``S*``, the deepest ones first, placed into those layers in ascending
            order; the displaced types and the remaining lower types follow, in
            their current relative order.
        ``moves``
            The number of assigned types that were outside their group's top ``S*``
            layers of the current ``order`` (the min-cost-flow cost).
        ``patch``
            Patch compute of the current step, ``{live group: sorted (shard type, 0)
            pairs}`` (``Plan.patch_shard_types`` gives the types alone).
            Empty unless ``mid_step`` is non-empty.  Otherwise it holds every shard
            type that no still-live group computed this step, i.e. every type whose
            holders that had it in their top ``S`` layers of the current ``order``
            (with the current ``S``) all failed mid-step, given to the type's new
            assignee, which computes it now before the all-reduce.  Empty on a
            wipe-out (global restart).
        ``micro_batches``, ``load``, ``step_cost``, ``split``
            ``m``; at ``m = 1``, ``load = S*``, ``step_cost = S*`` and ``split`` is
            ``assignment[:, None]``.

        **Micro-batches** (``m > 1``): ``load`` is ``L*``, the least largest number of
        micro-batches one live group computes; ``step_cost = L* / m``; ``split``
        (int32 ``(N, m)``) gives every micro-batch a live holder of its type, with no
        group above ``L*`` and the fewest micro-batches whose contributor differs from
        the previous ``split`` (``moves``).  A micro-batch that keeps a contributor
        keeps its index ``j``; the others take the free indices in ascending order,
        given to the new contributors in ascending group order.  ``assignment`` is
        ``split[:, 0]``; ``stack_number`` is the largest number of distinct types a
        live group computes part of; ``order`` puts, for each live group, the types it
        computes part of first, then the others, each in layout order.  ``patch``
        (only with ``mid_step``) holds every ``(t, j)`` whose previous contributor is
        in ``failed``: each live group computes only its own micro-batches, so those
        were not computed by a survivor; they go to their new contributor.

    Raises
    ------
    FailureSetError
        ``failed`` or ``mid_step`` is not a collection of group ids, or an id is not
        an integer, out of range or repeated, or ``mid_step`` names a group not in
        ``failed``.
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`, or ``stack_number`` is
        not an integer.
    ParameterError
        ``stack_number`` is not in ``[1, r]``; ``micro_batches`` is below 1 or ``N m``
        is above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`; ``split`` is given at
        ``m = 1``, or ``order`` or ``stack_number`` at ``m > 1``.
    LayoutError
        ``order`` does not have shape ``(N, r)``, is not integer, or a live group's
        row is not a permutation of its stack.
    PlanError
        ``split`` does not have shape ``(N, m)``, is not integer, or gives a
        micro-batch to a group that does not hold its type.
    SolverError
        The min-cost flow solver did not return an optimal flow (a bug, not bad input).

    See Also
    --------
    least_stack_number : ``S*`` alone, without the min-move phase.
    least_load : ``L*`` alone.
    spare_opt.planning.plan.check_plan : the definition of a valid plan.

    Notes
    -----
    *Fixed check.*  If the live groups' top ``S`` layers (current order) cover every
    shard type, giving each type to a holder that has it in its top ``S`` loads no
    group above ``S`` (a group's top ``S`` holds ``S`` types), so ``S* <= S``; when
    ``S`` also equals ``c(k)`` the plan is this cover with no moves and no flow is run.
    The paper runs Hopcroft-Karp here [3]_; a direct coverage count is enough.

    *Free search.*  Build the flow network source -> shard type (capacity 1) ->
    live holder (capacity 1) -> sink (capacity ``S``).  An assignment with loads at
    most ``S`` exists iff the maximum flow is ``N`` (integral flows, Ford-Fulkerson
    [2]_).  Replacing each live group by ``S`` copies turns this into a bipartite
    matching, so by Hall's theorem [1]_ it exists iff ``|T| <= S |H(T)|`` for every
    set ``T`` of shard types with live holders ``H(T)``; hence
    ``S* = max_T ceil(|T| / |H(T)|) >= ceil(N / (N - k)) = c(k)`` (take ``T`` = all
    types), and ``S* <= r`` unless a type has no live holder (a wipe-out; every group
    holds only ``r`` types).  Feasibility is monotone in ``S``: ``c(k)`` is tested
    first, then a binary search up to the fixed-check bound (``S`` if the check
    passed, else ``r``), ``O(log r)`` Dinic maximum flows.

    *Min-move reorder.*  On the same network with capacity ``S*``, an arc
    (type ``t``, group ``g``) costs 0 when ``t`` is in ``g``'s top ``S*`` layers of
    the current order and 1 otherwise; a min-cost maximum flow [4]_ is an assignment
    with the fewest moves (integral costs and capacities, so the flow is integral and
    exact).  If the current top ``S*`` layers already cover every type, the cover
    (each type to its holder with the smallest layer, then group id) costs 0 and
    the flow is skipped.

    *Micro-batches.*  Capacities become source -> type ``m``, type -> live holder
    ``m``, group -> sink ``L``; a split with loads at most ``L`` exists iff the flow
    is ``N m``, so by Hall's theorem ``L* = max_T ceil(m |T| / |H(T)|) >=
    ceil(m N / (N - k))`` (``T`` = all types) and ``L* <= m r`` unless a type has no
    live holder.  The search tests ``ceil(m N / (N - k))`` first, then doubles the
    step until a feasible ``L`` is found and bisects the last gap (feasibility is
    monotone in ``L``).  Stability: each arc (type ``t``, live holder ``g``) is
    doubled, cost 0 up to the number of micro-batches of ``t`` that ``g`` computed
    in the previous split and cost 1 up to ``m``; a min-cost flow at ``L*`` keeps
    the most micro-batches in place, and its cost is ``moves`` (a cost-1 unit on an
    arc whose cost-0 twin has room could be swapped for a cheaper flow).  When the
    previous split is still live and its largest load is ``L*``, it is kept (no
    flow).

    Time: ``O(N r)`` arrays; the flows run in C/C++.  Measured medians (random
    circulant layouts, ``N/10`` random failures, 2 shared cores): 4 ms at
    ``N = 1,000``, ``r = 10`` and 0.1 s at ``N = 10,000``, ``r = 14``, mostly in the
    min-cost flow (``docs/planner.md``).

    Examples
    --------
    Consecutive layout, ``N = 5``, ``r = 2``: group ``g`` holds ``(g, g + 1)``.  Group 2
    fails after computing shard type 2; group 1 takes it over and patches it now.

    >>> import numpy as np
    >>> from spare_opt import Layout
    >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
    >>> plan = plan_reorder(layout, [2], mid_step=[2])
    >>> plan.status, plan.stack_number, plan.lower_bound, plan.moves, plan.patch
    ('masked', 2, 2, 0, {1: [(2, 0)]})
    >>> plan.assignment.tolist()
    [0, 1, 1, 3, 4]

    Examples
    --------
    Group 2 of the 7-group Sidon layout fails between steps: every live group now
    computes two layers, and shard type 2 goes to group 1, which already has it in its
    top two layers (no move):

    >>> import numpy as np
    >>> from spare_opt import Layout, plan_reorder
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    >>> plan = plan_reorder(layout, [2])
    >>> plan.status, plan.stack_number, plan.lower_bound, plan.moves
    ('masked', 2, 2, 0)
    >>> plan.assignment.tolist()
    [0, 1, 1, 3, 4, 5, 6]
    >>> plan_reorder(layout, [3, 5, 6]).status  # the holders of shard type 6: a wipe-out
    'wipe-out'

    References
    ----------
    .. [1] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
    .. [2] L. R. Ford and D. R. Fulkerson, "Maximal flow through a network",
       Canadian J. Math. 8 (1956).
    .. [3] J. E. Hopcroft and R. M. Karp, "An n^{5/2} algorithm for maximum matchings
       in bipartite graphs", SIAM J. Comput. 2 (1973).
    .. [4] R. K. Ahuja, T. L. Magnanti and J. B. Orlin, "Network Flows: Theory,
       Algorithms, and Applications", Prentice Hall (1993), ch. 9-10.
    .. [5] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
       Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
       arXiv:2603.00357, Sec. 4.
    """
    stacks = check_layout(layout).stacks
    n, r = stacks.shape
    failed = normalise_groups(failed, n)
    mid_step = normalise_groups(mid_step, n, what="mid-step failures")
    outside = mid_step[~np.isin(mid_step, failed)]
    if outside.size:
        raise FailureSetError(f"mid-step failures: group {int(outside[0])} is not in the failure set")
    current_s = _check_stack_number(stack_number, r)
    m = check_micro_batches(micro_batches, n)
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    if m > 1:
        if order is not None or current_s != 1:
            raise ParameterError("at micro_batches > 1 the previous plan is given by split alone: "
                                 "leave order and stack_number at their defaults")
        return _plan_micro_batches(layout, failed, alive, mid_step, m, split)
    if split is not None:
        raise ParameterError("split is the previous plan at micro_batches > 1; at m = 1 pass order and stack_number")
    current = _check_order(order, stacks, alive)
    bound = lower_bound(n, failed.size)

    lost = _lost_shard_types(layout, alive)
    if lost.size:
        return Plan(status=WIPE_OUT, stack_number=None, lower_bound=bound, failed=failed, lost_shards=lost)

    live = np.flatnonzero(alive).astype(np.int32)
    network = _CoverNetwork(current, live)
    # Phase 1, fixed check: a cover at the current S bounds S* by S.
    fixed = network.top_layers_cover(current_s)
    # Phase 2, free search: least feasible S in [c(k), S or r] (no flow when c(k) = S).
    best = network.least_stack_number(bound, current_s if fixed else r)
    # Phase 3, min-move reorder: a zero-cost cover when one exists, else min-cost flow.
    if network.top_layers_cover(best):  # includes the fixed check passing with S* = S
        assignment = network.top_layer_cover(best)
    else:
        assignment = network.min_move_assignment(best)

    new_order, moves = _rewrite_orders(current, live, assignment, best)
    patch = {}
    if mid_step.size:
        computed = np.zeros(n, dtype=bool)
        computed[current[live, :current_s]] = True
        patch_types = np.flatnonzero(~computed)
        for t in patch_types:
            patch.setdefault(int(assignment[t]), []).append((int(t), 0))
    return Plan(
        status=MASKED,
        stack_number=int(best),
        lower_bound=bound,
        failed=failed,
        lost_shards=np.zeros(0, dtype=np.int32),
        assignment=assignment,
        order=new_order,
        moves=int(moves),
        patch=patch,
    )


def least_stack_number(layout, failed):
    """The least all-reduce stack number ``S*`` that masks a failure set.

    Only the free search of :func:`plan_reorder`: no order, no min-move phase.

    Parameters
    ----------
    layout : Layout
    failed : iterable of int
        The failed groups, ids in ``[0, N)``, each at most once.

    Returns
    -------
    int or None
        ``S*`` in ``[c(k), r]``: the least ``S`` such that every shard type can be
        given to one live holder with no live group given more than ``S`` types;
        ``None`` on a wipe-out (some shard type has no live holder).

    Raises
    ------
    FailureSetError
        ``failed`` is not a collection of group ids, or an id is not an integer, out
        of range or repeated.
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`.

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout
    >>> block = Layout([[0, 1], [1, 0], [2, 3], [3, 2]])  # blocks of r = 2 groups
    >>> least_stack_number(block, [0]), least_stack_number(block, [0, 2]), least_stack_number(block, [0, 1])
    (2, 2, None)

    Notes
    -----
    By Hall's theorem [1]_, ``S* = max_T ceil(|T| / |H(T)|)`` over sets ``T`` of shard
    types with live holders ``H(T)``; it is found by maximum flows [2]_ as in
    :func:`plan_reorder`.

    References
    ----------
    .. [1] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
    .. [2] L. R. Ford and D. R. Fulkerson, "Maximal flow through a network",
       Canadian J. Math. 8 (1956).
    """
    return least_load(layout, failed, micro_batches=1)  # L* = S* for whole shards


def least_load(layout, failed, *, micro_batches=1):
    """The least load ``L*``: the least largest number of micro-batches one live group computes.

    Only the search of :func:`plan_reorder`: no split, no stability phase.

    Parameters
    ----------
    layout : Layout
    failed : iterable of int
        The failed groups, ids in ``[0, N)``, each at most once.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.

    Returns
    -------
    int or None
        ``L*`` in ``[ceil(m N / (N - k)), m r]``, the least ``L`` such that every
        micro-batch can be given to a live holder of its type with no live group given
        more than ``L``; ``S*`` at ``m = 1``.  ``None`` on a wipe-out.

    Raises
    ------
    FailureSetError
        ``failed`` is not a collection of group ids, or an id is not an integer, out
        of range or repeated.
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout` or ``micro_batches``
        is not an integer.
    ParameterError
        ``micro_batches < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    Examples
    --------
    One failure of the 7-group Sidon layout costs two layers with whole shards and
    ``9 / 8`` of a layer with 8 micro-batches:

    >>> import numpy as np
    >>> from spare_opt import Layout
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    >>> least_load(layout, [2]), least_load(layout, [2], micro_batches=8)
    (2, 10)

    Notes
    -----
    By Hall's theorem [1]_, ``L* = max_T ceil(m |T| / |H(T)|)`` over sets ``T`` of
    shard types with live holders ``H(T)``; found by maximum flows [2]_ as in
    :func:`plan_reorder`.

    References
    ----------
    .. [1] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
    .. [2] L. R. Ford and D. R. Fulkerson, "Maximal flow through a network",
       Canadian J. Math. 8 (1956).
    """
    stacks = check_layout(layout).stacks
    n, r = stacks.shape
    failed = normalise_groups(failed, n)
    m = check_micro_batches(micro_batches, n)
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    if _lost_shard_types(layout, alive).size:
        return None
    network = _CoverNetwork(stacks, np.flatnonzero(alive).astype(np.int32), micro_batches=m)
    return int(network.least_stack_number(lower_bound(n, failed.size, m), m * r))


def stack_number_certificate(layout, failed):
    """The least stack number ``S*`` after a failure set, with a Hall's-condition certificate.

    Parameters
    ----------
    layout : Layout
        The stack layout (``N`` groups, redundancy ``r``).
    failed : iterable of int
        Failed group ids in ``[0, N)``, no repeats.

    Returns
    -------
    stack_number : int or None
        ``S*``: the least number of layers such that every shard type can be given to one
        live holder with no live group given more than ``S*`` types; ``None`` on a
        wipe-out (some shard type has no live holder).
    hall_types : numpy.ndarray of int32
        On a masked set, a set ``T`` of shard types with ``|T| > (S* - 1) * |L(T)|``
        where ``L(T)`` are the live holders of ``T``: the proof that ``S* - 1`` layers do
        not suffice (when ``S* = 1``, all shard types and all live groups).  On a
        wipe-out, the lost shard types.
    hall_holders : numpy.ndarray of int32
        ``L(T)``, the live holders of ``hall_types`` (empty on a wipe-out).

    Raises
    ------
    FailureSetError
        A group id is out of range, repeated or not an integer.
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`.

    Notes
    -----
    A b-matching problem solved as a maximum flow (source -> shard type, capacity 1;
    shard type -> live holder, capacity 1; group -> sink, capacity ``S``) with
    ``scipy.sparse.csgraph.maximum_flow`` (Dinic), and binary search on ``S`` between
    ``c(k)`` and ``r``: the free search of :func:`spare_opt.plan_reorder`, same network.
    The certificate is the source side of a minimum cut at ``S* - 1``: by max-flow/min-cut, ``|T| > (S* - 1) |L(T)|`` (Hall's theorem in its
    deficiency form).  This is the reference used by the analysis tools; the online
    controller and the exact planner are tested against the same definition.
    """
    stacks = check_layout(layout).stacks
    n, r = stacks.shape
    failed = normalise_groups(failed, n)
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    return _certified_stack_number(stacks, alive)


def _certified_stack_number(stacks, alive):
    """``S*`` of the live groups ``alive`` (bool, (N,)) with a Hall's-condition certificate.

    Returns ``(S*, T, H(T))``: on a masked set ``T`` is a set of shard types with
    ``|T| > (S* - 1) |H(T)|`` (all types and all live groups when ``S* = 1``); on a
    wipe-out ``(None, lost types, empty)``.  Used by :func:`stack_number_certificate`
    and :mod:`spare_opt.guarantees.worst_case`.
    """
    n, r = stacks.shape
    covered = np.zeros(n, dtype=bool)
    covered[stacks[alive].ravel()] = True
    if not covered.all():
        return None, np.flatnonzero(~covered).astype(np.int32), np.zeros(0, dtype=np.int32)
    live = np.flatnonzero(alive).astype(np.int32)
    network = _CoverNetwork(stacks, live)
    best = int(network.least_stack_number(lower_bound(n, n - live.size), r))
    if best == 1:
        return 1, np.arange(n, dtype=np.int32), live
    types, holders = network.hall_violator(best - 1)
    return best, types, holders


# ------------------------------------------------------------ micro-batches
def _plan_micro_batches(layout, failed, alive, mid_step, m, split):
    """:func:`plan_reorder` at ``m > 1`` (arguments checked, except ``split``)."""
    stacks = layout.stacks
    n, r = stacks.shape
    previous = _check_previous_split(split, stacks, m)
    bound = lower_bound(n, failed.size)
    lost = _lost_shard_types(layout, alive)
    if lost.size:
        return Plan(status=WIPE_OUT, stack_number=None, lower_bound=bound, failed=failed, lost_shards=lost,
                    micro_batches=m)
    live = np.flatnonzero(alive).astype(np.int32)
    network = _CoverNetwork(stacks, live, micro_batches=m)
    best = network.least_load(lower_bound(n, failed.size, m), m * r)
    if alive[previous].all() and np.bincount(previous.ravel(), minlength=n).max() <= best:
        new_split, moves = previous.copy(), 0  # the previous split is still valid at L*: keep it
        counts = network.arc_counts(previous, alive)[0]
    else:
        new_split, counts, moves = network.stable_split(best, previous, alive)
    touched = np.zeros((n, r), dtype=bool)
    used = counts > 0
    touched[network.groups[used], network.layers[used]] = True
    patch = {}
    if mid_step.size:
        for t, j in np.argwhere(~alive[previous]).tolist():
            patch.setdefault(int(new_split[t, j]), []).append((t, j))
    return Plan(
        status=MASKED,
        stack_number=int(touched.sum(axis=1).max()),
        lower_bound=bound,
        failed=failed,
        lost_shards=np.zeros(0, dtype=np.int32),
        assignment=new_split[:, 0].copy(),
        order=_derived_order(stacks, touched, alive),
        moves=int(moves),
        patch=patch,
        micro_batches=m,
        load=int(best),
        split=new_split,
    )


def _check_previous_split(split, stacks, m):
    """The previous split as int32 (N, m); every entry must be a holder (live or not) of its type."""
    n = stacks.shape[0]
    holders = _holders_by_layer(stacks)
    if split is None:
        return np.repeat(holders[:, :1], m, axis=1)
    try:
        array = np.asarray(split)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"split is not a rectangular integer array: {exc}") from None
    if array.shape != (n, m):
        raise PlanError(f"split must have shape (N, m) = ({n}, {m}), got {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise PlanError(f"split must hold integer group ids, got dtype {array.dtype}")
    outside = (array < 0) | (array >= n)
    if outside.any():
        raise PlanError(f"split names group {int(array[outside][0])}, outside [0, {n})")
    array = array.astype(np.int32)
    missing = _split_layers(stacks, array) < 0
    if missing.any():
        t, j = np.argwhere(missing)[0]
        raise PlanError(f"split gives micro-batch ({t}, {j}) to group {array[t, j]}, which does not hold shard type {t}")
    return array


# ---------------------------------------------------------------- validation
def _check_stack_number(stack_number, r):
    return check.integer("stack number S", stack_number, minimum=1, maximum=r)


def _check_order(order, stacks, alive):
    """Return the current orders as int32 (N, r); live rows must permute the layout rows."""
    if order is None:
        return stacks
    try:
        array = np.asarray(order)
    except (TypeError, ValueError) as exc:
        raise LayoutError(f"order is not a rectangular integer array: {exc}") from None
    if array.shape != stacks.shape:
        raise LayoutError(f"order must have the layout's shape {stacks.shape}, got {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise LayoutError(f"order must hold integer shard types, got dtype {array.dtype}")
    live = np.flatnonzero(alive)
    differs = np.any(np.sort(array[live], axis=1) != np.sort(stacks[live], axis=1), axis=1)
    if np.any(differs):
        g = int(live[np.argmax(differs)])
        raise LayoutError(
            f"order row of live group {g} is {array[g].tolist()}, not a permutation of its stack {stacks[g].tolist()}"
        )
    current = np.array(array, dtype=np.int32)
    current[~alive] = stacks[~alive]  # failed rows are ignored; keep them well-formed
    return current


def _lost_shard_types(layout, alive):
    """Shard types with no live holder (int32, sorted)."""
    n, r = layout.stacks.shape
    holders = layout.holders()[1].reshape(n, r)
    return np.flatnonzero(~alive[holders].any(axis=1)).astype(np.int32)


# -------------------------------------------------------------- flow network
class _CoverNetwork:
    """Shard types and live groups of one failure set, with the flows of the three phases.

    ``types[e]``, ``groups[e]``, ``layers[e]`` describe the arc ``e`` of the bipartite
    graph: live group ``groups[e]`` holds type ``types[e]`` at layer ``layers[e]`` of its
    current order.  Arcs are sorted by (type, group).
    """

    def __init__(self, current, live, micro_batches=1):
        n, r = current.shape
        self.n = n
        self.m = micro_batches
        self.live = live
        types = current[live].ravel()
        groups = np.repeat(live, r)
        layers = np.tile(np.arange(r, dtype=np.int32), live.size)
        by_type = np.lexsort((groups, types))
        self.types = types[by_type]
        self.groups = groups[by_type]
        self.layers = layers[by_type]
        self._capacity_graph = None

    # Phase 1 -----------------------------------------------------------------
    def top_layers_cover(self, s):
        """Whether the live groups' top ``s`` layers cover every shard type."""
        covered = np.zeros(self.n, dtype=bool)
        covered[self.types[self.layers < s]] = True
        return bool(covered.all())

    def top_layer_cover(self, s):
        """Each type given to the live holder with it highest in its top ``s`` (ties: lowest id).

        Loads are at most ``s`` since a group's top ``s`` layers hold ``s`` types.
        Requires :meth:`top_layers_cover` to hold.
        """
        inside = np.flatnonzero(self.layers < s)
        ranked = inside[np.lexsort((self.groups[inside], self.layers[inside], self.types[inside]))]
        types = self.types[ranked]
        first = np.ones(types.size, dtype=bool)
        first[1:] = types[1:] != types[:-1]
        assignment = np.empty(self.n, dtype=np.int32)
        assignment[types[first]] = self.groups[ranked[first]]
        return assignment

    # Phase 2 -----------------------------------------------------------------
    def _feasible(self, s):
        """Whether a b-matching with loads <= ``s`` covers every type (Dinic max flow = N)."""
        if self._capacity_graph is None:
            self._capacity_graph = self._build_capacity_graph()
        graph = self._capacity_graph
        from scipy.sparse.csgraph import maximum_flow  # imported on first use: a cheap "import spare_opt"

        graph.data[-self.live.size:] = s  # the group -> sink arcs are the last rows
        return maximum_flow(graph, 0, 2 * self.n + 1).flow_value == self.n * self.m

    def _build_capacity_graph(self):
        # Nodes: 0 source, 1 + t shard types, 1 + N + g groups, 2N + 1 sink.  The CSR
        # arrays are written directly, rows in node order, columns sorted.
        n, live = self.n, self.live
        per_type = np.bincount(self.types, minlength=n)
        per_row = np.zeros(2 * n + 2, dtype=np.int64)
        per_row[0] = n
        per_row[1:n + 1] = per_type
        per_row[1 + n + live] = 1
        indptr = np.concatenate(([0], np.cumsum(per_row)))
        indices = np.concatenate((
            np.arange(1, n + 1),
            1 + n + self.groups.astype(np.int64),
            np.full(live.size, 2 * n + 1),
        )).astype(np.int32)
        data = np.full(indices.size, self.m, dtype=np.int32)  # source -> type and type -> group: m
        import scipy.sparse as sp

        return sp.csr_matrix((data, indices, indptr), shape=(2 * n + 2, 2 * n + 2))

    def hall_violator(self, s):
        """Shard types ``T`` and their live holders ``H(T)`` with ``|T| > s |H(T)|``.

        The shard-type and group nodes on the source side of a minimum cut of the
        network with capacity ``s`` per group: by max-flow/min-cut such a set exists
        exactly when ``s`` is infeasible (Hall's theorem in its deficiency form).
        Requires ``s`` to be infeasible.
        """
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        if self._capacity_graph is None:
            self._capacity_graph = self._build_capacity_graph()
        graph = self._capacity_graph
        graph.data[-self.live.size:] = s
        result = maximum_flow(graph, 0, 2 * self.n + 1)
        residual = (graph - result.flow).tocsr()
        residual.data[residual.data < 0] = 0
        residual.eliminate_zeros()
        reached = np.asarray(breadth_first_order(residual, 0, directed=True, return_predecessors=False))
        types = np.sort(reached[(reached >= 1) & (reached <= self.n)] - 1).astype(np.int32)
        holders = np.sort(reached[(reached > self.n) & (reached <= 2 * self.n)] - self.n - 1).astype(np.int32)
        if not types.size > s * holders.size:
            raise SolverError("internal error: the minimum cut is not a Hall violator")
        return types, holders

    def deficient_types(self, s):
        """The shard types of a Hall violation at loads ``<= s``, or ``None`` when ``s`` is feasible.

        One maximum flow with capacity ``s`` per live group; when it is short of
        ``N m``, the types reached from the source in the residual network.  Every live
        holder of a reached type is reached (a reached type that sends flow to a holder
        still has residual room towards it, or arrived by a reverse arc from another
        holder, so its arc to this one is not saturated either), so with the reached
        groups ``G'``: ``m |T| > s |G'| >= s |H(T)|`` (the minimum cut), a Hall violator
        whatever the types and groups outside (:func:`spare_opt.planning._split_kernels.recover_split`
        keeps it as its certificate).

        Returns
        -------
        numpy.ndarray of int32 or None
            Sorted type ids ``T``.
        """
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        if self._capacity_graph is None:
            self._capacity_graph = self._build_capacity_graph()
        graph = self._capacity_graph
        graph.data[-self.live.size:] = s
        result = maximum_flow(graph, 0, 2 * self.n + 1)
        if result.flow_value == self.n * self.m:
            return None
        residual = (graph - result.flow).tocsr()
        residual.data[residual.data < 0] = 0
        residual.eliminate_zeros()
        reached = np.asarray(breadth_first_order(residual, 0, directed=True, return_predecessors=False))
        return np.sort(reached[(reached >= 1) & (reached <= self.n)] - 1).astype(np.int32)

    def least_stack_number(self, lowest, highest):
        """The least feasible ``S`` in ``[lowest, highest]``; ``highest`` must be feasible."""
        if lowest >= highest or self._feasible(lowest):
            return min(lowest, highest)
        return self._bisect(lowest + 1, highest)

    def least_load(self, lowest, highest):
        """The least feasible load in ``[lowest, highest]`` (``highest`` feasible): ``lowest``
        first, then steps doubling from it until a feasible load, then bisection of the
        last gap.  ``O(log(L* - lowest))`` maximum flows; one when the bound is met."""
        if lowest >= highest or self._feasible(lowest):
            return min(lowest, highest)
        low, step = lowest + 1, 1  # invariant: every load below low is infeasible
        while True:
            probe = min(lowest + step, highest)
            if probe == highest or self._feasible(probe):
                high = probe
                break
            low = probe + 1
            step *= 2
        return self._bisect(low, high)

    def _bisect(self, low, high):
        """The least feasible value in ``[low, high]``, ``high`` feasible (binary search)."""
        while low < high:
            middle = (low + high) // 2
            if self._feasible(middle):
                high = middle
            else:
                low = middle + 1
        return high

    def arc_counts(self, split, alive):
        """Micro-batches per arc in ``split`` (int64, one per arc), counting live contributors only."""
        entries = split.ravel()
        types = np.repeat(np.arange(self.n, dtype=np.int64), split.shape[1])
        live = alive[entries]
        keys = self.types.astype(np.int64) * self.n + self.groups
        arcs = np.searchsorted(keys, types[live] * self.n + entries[live])
        return np.bincount(arcs, minlength=self.types.size), arcs, np.flatnonzero(live)

    def stable_split(self, load, previous, alive):
        """A split with loads at most ``load`` that keeps the most micro-batches of ``previous``
        with their contributor (min-cost flow); returns ``(split, counts per arc, moves)``."""
        from ortools.graph.python import min_cost_flow

        n, m, live = self.n, self.m, self.live
        counts, arcs, entries = self.arc_counts(previous, alive)
        sink = 2 * n
        kept = np.flatnonzero(counts)
        arc_count = self.types.size
        tails = np.concatenate((self.types[kept], self.types, n + live)).astype(np.int64)
        heads = np.concatenate((n + self.groups[kept], n + self.groups, np.full(live.size, sink))).astype(np.int64)
        capacities = np.concatenate((counts[kept], np.full(arc_count, m, np.int64), np.full(live.size, load, np.int64)))
        costs = np.concatenate((np.zeros(kept.size, np.int64), np.ones(arc_count, np.int64),
                                np.zeros(live.size, np.int64)))
        flow = min_cost_flow.SimpleMinCostFlow()
        flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities.astype(np.int64), costs)
        supplies = np.zeros(sink + 1, dtype=np.int64)
        supplies[:n] = m
        supplies[sink] = -n * m
        flow.set_nodes_supplies(np.arange(sink + 1), supplies)
        status = flow.solve()
        if status != flow.OPTIMAL:
            raise SolverError(f"min-cost flow ended with status {status} at L*={load} (expected a feasible network)")
        values = flow.flows(np.arange(kept.size + arc_count))
        new_counts = values[kept.size:].copy()
        new_counts[kept] += values[:kept.size]
        split = self.split_from_counts(new_counts, previous, counts, arcs, entries)
        moves = int((split != previous).sum())
        if moves != flow.optimal_cost():
            raise SolverError(f"internal error: {moves} micro-batches moved, min-cost flow optimum {flow.optimal_cost()}")
        return split, new_counts, moves

    def split_from_counts(self, new_counts, previous, counts, arcs, entries):
        """The split with ``new_counts`` micro-batches per arc that keeps the indices ``j`` of
        ``previous`` where it can; the other indices are filled in ascending order, by
        contributors in ascending group order."""
        n, m = self.n, self.m
        split = np.full(n * m, -1, dtype=np.int32)
        keep = np.minimum(counts, new_counts)
        # Live previous entries by (arc, j): the first keep[arc] of each arc stay.
        by_arc = np.argsort(arcs, kind="stable")  # entries are in (t, j) order already
        sorted_arcs = arcs[by_arc]
        starts = np.searchsorted(sorted_arcs, sorted_arcs, side="left")
        rank = np.arange(sorted_arcs.size) - starts
        stay = rank < keep[sorted_arcs]
        split[entries[by_arc[stay]]] = self.groups[sorted_arcs[stay]]
        free = np.flatnonzero(split < 0)  # ascending (t, j)
        extra = np.repeat(self.groups, (new_counts - keep).astype(np.int64))  # ascending (t, group)
        if extra.size != free.size:
            raise SolverError("internal error: the flow does not give every micro-batch a contributor")
        split[free] = extra
        return split.reshape(n, m)

    # Phase 3 -----------------------------------------------------------------
    def min_move_assignment(self, s):
        """A min-cost b-matching with loads <= ``s``: cost 1 per type outside its group's top ``s``."""
        from ortools.graph.python import min_cost_flow

        n, live = self.n, self.live
        sink = 2 * n
        tails = np.concatenate((self.types, n + live)).astype(np.int64)
        heads = np.concatenate((n + self.groups, np.full(live.size, sink))).astype(np.int64)
        capacities = np.concatenate((np.ones(self.types.size, np.int64), np.full(live.size, s, np.int64)))
        costs = np.concatenate(((self.layers >= s).astype(np.int64), np.zeros(live.size, np.int64)))
        flow = min_cost_flow.SimpleMinCostFlow()
        flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities, costs)
        supplies = np.zeros(sink + 1, dtype=np.int64)
        supplies[:n] = 1
        supplies[sink] = -n
        flow.set_nodes_supplies(np.arange(sink + 1), supplies)
        status = flow.solve()
        if status != flow.OPTIMAL:
            raise SolverError(f"min-cost flow ended with status {status} at S*={s} (expected a feasible network)")
        used = flow.flows(np.arange(self.types.size)) > 0
        assignment = np.full(n, -1, dtype=np.int32)
        assignment[self.types[used]] = self.groups[used]
        if np.any(assignment < 0):
            raise SolverError("min-cost flow left a shard type unassigned")
        return assignment


# ----------------------------------------------------------------- new orders
def _rewrite_orders(current, live, assignment, s):
    """New orders (failed rows -1) and the number of moves; see plan_reorder's Returns."""
    n, r = current.shape
    new_order = np.full((n, r), -1, dtype=np.int32)
    new_order[live] = current[live]
    assigned = assignment[current[live]] == live[:, None]
    incoming = assigned[:, s:].sum(axis=1)
    moves = int(incoming.sum())
    for row in np.flatnonzero(incoming):
        g = live[row]
        old = current[g].tolist()
        mine = assigned[row].tolist()
        arriving = [old[p] for p in range(s, r) if mine[p]]
        free = [p for p in range(s) if not mine[p]]
        evicted_layers = free[len(free) - len(arriving):]
        top = old[:s]
        displaced = [old[p] for p in evicted_layers]
        for p, shard in zip(evicted_layers, arriving):
            top[p] = shard
        new_order[g] = top + displaced + [old[p] for p in range(s, r) if not mine[p]]
    return new_order, moves
