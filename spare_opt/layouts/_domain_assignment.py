"""The assignment route of :func:`~spare_opt.layouts.domain_layouts.domain_safe` (private).

For topologies whose domains are not intervals of one cyclic order of the groups, the
rows of a Sidon layout are assigned to physical groups so that no domain contains two
rows sharing a shard type (an edge of :func:`conflict_graph`): a graph colouring
(networkx) or a greedy placement gives the start, a min-conflicts swap search and
CP-SAT neighbourhoods repair and improve it.  :mod:`.domain_layouts` re-exports
:func:`conflict_graph` and the private names that tests import from it.
"""

import math
import time

import numpy as np

from .._core.errors import ParameterError, SolverError
from .generators import _cp_sat_import_seconds, sidon
from .layout import Layout, check_layout

# networkx's equitable colouring (Kierstead-Kostochka) takes about 0.6 s at N = 600 and
# a minute at N = 10,000 (measured, docs/domains.md): beyond this N the greedy start is used.
_EQUITABLE_MAX_GROUPS = 2500
# Largest dense count array (domains x shard types) of the assignment route.
_MAX_COUNT_ENTRIES = 60_000_000
# Size of the CP-SAT neighbourhoods of the assignment route: rows x cells pairs.
_NEIGHBOURHOOD_PAIRS = 3_000
# The whole assignment model is solved at once when it has at most this many pairs.
_FULL_MODEL_PAIRS = 20_000
# Seconds per CP-SAT neighbourhood solve.
_NEIGHBOURHOOD_SECONDS = 1.0


# ============================================================ conflict graph
def conflict_graph(layout):
    """The conflict graph of a layout: groups joined when they share a shard type.

    Parameters
    ----------
    layout : Layout

    Returns
    -------
    networkx.Graph
        Nodes ``0 .. N-1``; an edge ``(g, h)`` with attribute ``shared`` (the number
        of shard types ``g`` and ``h`` share) for every pair sharing at least one.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout.

    Notes
    -----
    A placement is domain-safe exactly when no domain contains an edge of this graph.
    Every group has at most ``r (r - 1)`` neighbours (exactly that many for a Sidon
    layout), so the graph has at most ``N r (r - 1) / 2`` edges: about 10^6 at
    ``N = 10,000``, ``r = 14``, which networkx holds in about 0.4 GB.

    Examples
    --------
    >>> from spare_opt import conflict_graph, sidon
    >>> graph = conflict_graph(sidon(7, 3))
    >>> graph.number_of_edges(), max(d for _, d in graph.degree())
    (21, 6)
    """
    import networkx as nx

    stacks = check_layout(layout).stacks
    n = stacks.shape[0]
    pairs, shared = _conflict_pairs(layout)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((int(g), int(h), {"shared": int(s)}) for (g, h), s in zip(pairs, shared))
    return graph


def _conflict_pairs(layout):
    """Pairs ``g < h`` of groups sharing shard types, and how many each, as arrays."""
    n, r = layout.stacks.shape
    holders = layout.holders()[1].reshape(n, r).astype(np.int64)
    first, second = np.triu_indices(r, 1)
    low = np.minimum(holders[:, first], holders[:, second]).ravel()
    high = np.maximum(holders[:, first], holders[:, second]).ravel()
    keys, shared = np.unique(low * n + high, return_counts=True)
    return np.stack((keys // n, keys % n), axis=1), shared


# ========================================================== assignment route
class _Cells:
    """Groups with the same domains, and the domains of each cell (private)."""

    def __init__(self, domains):
        n = domains.groups
        signatures = {}
        self.cell_of_group = np.empty(n, dtype=np.int64)
        cell_domains = []
        for g in range(n):
            signature = tuple(domains.entry_domain[domains.indptr[g]:domains.indptr[g + 1]].tolist())
            cell = signatures.get(signature)
            if cell is None:
                cell = signatures[signature] = len(cell_domains)
                cell_domains.append(np.asarray(signature, dtype=np.int64))
            self.cell_of_group[g] = cell
        self.count = len(cell_domains)
        self.domains = cell_domains
        self.capacity = np.bincount(self.cell_of_group, minlength=self.count)
        self.domain_cells = [[] for _ in range(domains.count)]
        for cell, ids in enumerate(cell_domains):
            for d in ids.tolist():
                self.domain_cells[d].append(cell)
        import scipy.sparse as sp

        rows = np.repeat(np.arange(self.count), [ids.size for ids in cell_domains])
        columns = np.concatenate(cell_domains) if cell_domains else np.zeros(0, dtype=np.int64)
        #: (cells, domains) 0/1 matrix: which domains each cell is in.
        self.incidence = sp.csr_matrix((np.ones(rows.size), (rows, columns)), shape=(self.count, max(1, domains.count)))


class _Assignment:
    """Rows assigned to cells, with the holder counts of every (domain, shard type) (private)."""

    def __init__(self, layout, domains, cells, cell_of_row, target):
        stacks = layout.stacks
        self.stacks = stacks.astype(np.int64)
        self.holders = layout.holders()[1].reshape(stacks.shape).astype(np.int64)
        self.n = stacks.shape[0]
        self.domains = domains
        self.cells = cells
        self.target = target
        self.cell_of_row = np.asarray(cell_of_row, dtype=np.int64)
        self.counts = np.zeros((domains.count, self.n), dtype=np.int32)
        self._add(np.arange(self.n), self.cell_of_row, 1)

    def _add(self, rows, cells, sign):
        for row, cell in zip(rows.tolist(), cells.tolist()):
            ids = self.cells.domains[cell]
            if ids.size:
                self.counts[ids[:, None], self.stacks[row][None, :]] += sign

    def move(self, rows, new_cells):
        self._add(rows, self.cell_of_row[rows], -1)
        self.cell_of_row[rows] = new_cells
        self._add(rows, new_cells, 1)

    def excess(self):
        return int(np.maximum(self.counts - self.target, 0).sum())

    def multiplicity(self):
        return int(self.counts.max()) if self.counts.size else 0


def _assignment_route(groups, redundancy, domains, lower, deadline, seed, workers, metadata):
    if domains.count * groups > _MAX_COUNT_ENTRIES:
        raise ParameterError(
            f"the assignment route keeps a count per (domain, shard type): {domains.count} domains x N = {groups} "
            f"is above the limit of {_MAX_COUNT_ENTRIES:,}; use fewer levels or method 'circulant'"
        )
    deadline += _cp_sat_import_seconds()  # not charged to the time limit, as in spare_opt.sidon
    started = time.perf_counter()
    budget = deadline - started
    base = sidon(groups, redundancy, time_limit=max(0.05, budget / 4), seed=seed, workers=workers)
    for key in ("lambda", "lambda_lower_bound", "lambda_proved_optimal", "solver_status", "construction"):
        metadata[key] = base.metadata.get(key)
    metadata["reason"] = f"rows of a Sidon layout: {base.metadata.get('reason')}"
    cells = _Cells(domains)
    rng = np.random.default_rng(seed)
    steps = []
    cell_of_row, start = _colouring_start(base, domains, cells, rng)
    state = _Assignment(base, domains, cells, cell_of_row, lower)
    steps.append(f"{start}: excess {state.excess()}, multiplicity {state.multiplicity()}")
    if state.excess():
        moves = _swap_search(state, rng, time.perf_counter() + (deadline - time.perf_counter()) / 2)
        steps.append(f"swap search: {moves} swaps, excess {state.excess()}, multiplicity {state.multiplicity()}")
    if state.excess() and groups * cells.count <= _FULL_MODEL_PAIRS:
        _improved, status = _improve(state, np.arange(groups), deadline, seed, workers)
        steps.append(f"CP-SAT whole model {status}: excess {state.excess()}")
    rounds = 0
    while state.excess() and deadline - time.perf_counter() > 0.05:
        rows = _neighbourhood(state, rng)
        _improve(state, rows, min(deadline, time.perf_counter() + _NEIGHBOURHOOD_SECONDS), seed + rounds, workers)
        rounds += 1
    if rounds:
        steps.append(f"CP-SAT neighbourhoods: {rounds}, excess {state.excess()}")
    metadata.update(domain_route="assignment", search="; ".join(steps), domain_cells=cells.count)
    metadata["_claimed_multiplicity"] = state.multiplicity()
    # Within a cell, its rows go to its groups in increasing order (both sorted by cell).
    group_rows = np.empty(groups, dtype=np.int64)
    group_rows[np.argsort(cells.cell_of_group, kind="stable")] = np.argsort(state.cell_of_row, kind="stable")
    return Layout(base.stacks[group_rows], method="domain-safe", metadata=metadata)


def _colouring_start(layout, domains, cells, rng):
    """Rows to cells: an equitable colouring of the conflict graph when it fits, else a greedy placement."""
    import networkx as nx

    n, r = layout.stacks.shape
    equal_cells = (cells.count >= 2 and np.all(cells.capacity == cells.capacity[0])
                   and all(ids.size == 1 for ids in cells.domains)
                   and len({int(ids[0]) for ids in cells.domains}) == cells.count)
    if equal_cells and n <= _EQUITABLE_MAX_GROUPS and cells.count >= r * (r - 1) + 1:
        graph = conflict_graph(layout)
        if cells.count >= max((d for _, d in graph.degree()), default=0) + 1:
            colours = nx.equitable_color(graph, cells.count)
            cell_of_row = np.fromiter((colours[v] for v in range(n)), dtype=np.int64, count=n)
            return cell_of_row, "equitable colouring (networkx)"
    return _greedy_start(layout, domains, cells, rng), "greedy placement"


def _greedy_start(layout, domains, cells, rng):
    """Each row, in random order, to the open cell where it meets the fewest holders of its types."""
    n = layout.groups
    stacks = layout.stacks.astype(np.int64)
    counts = np.zeros((max(1, domains.count), n), dtype=np.int32)
    free = cells.capacity.astype(np.int64).copy()
    cell_of_row = np.empty(n, dtype=np.int64)
    for row in rng.permutation(n).tolist():
        met = counts[:, stacks[row]].sum(axis=1)
        score = cells.incidence @ met - free / (n + 1.0)
        score[free == 0] = np.inf
        cell = int(np.argmin(score))
        cell_of_row[row] = cell
        free[cell] -= 1
        ids = cells.domains[cell]
        if ids.size:
            counts[ids[:, None], stacks[row][None, :]] += 1
    return cell_of_row


def _swap_search(state, rng, deadline, exact_checks=8, tenure=7):
    """Min-conflicts swaps until the excess is 0, the deadline passes or the search stalls.

    Each step takes a row of an overfull (domain, type) pair at random and estimates,
    for every other row at once, how the excess would change if the two traded cells
    (what each leaves and what each meets, counted over the cells' domains: a
    vectorised estimate); the few best are evaluated exactly (:func:`_swap_delta`) and
    the best is made when it does not raise the excess (sideways moves allowed,
    recently moved rows tabu for a few steps).  Returns the number of swaps.
    """
    cells = state.cells
    n, target = state.n, state.target
    stacks, counts = state.stacks, state.counts
    cell_sizes = np.array([ids.size for ids in cells.domains], dtype=np.int64)
    cell_indptr = np.concatenate(([0], np.cumsum(cell_sizes)))
    cell_flat = np.concatenate(cells.domains) if cells.count else np.zeros(0, dtype=np.int64)
    tabu_until = np.zeros(n, dtype=np.int64)
    excess = state.excess()
    best_excess, stall = excess, 0
    swaps = iteration = 0
    while excess and stall < 200 and time.perf_counter() < deadline:
        iteration += 1
        domain, shard = divmod(int(rng.choice(np.flatnonzero(counts.ravel() > target))), n)
        rows = [row for row in state.holders[shard].tolist() if domain in cells.domains[state.cell_of_row[row]]]
        row = rows[rng.integers(len(rows))]
        here = int(state.cell_of_row[row])
        # What every row w leaves (its full pairs) and would meet in the row's cell.
        sizes = cell_sizes[state.cell_of_row]
        entry_row = np.repeat(np.arange(n), sizes)
        within = np.arange(entry_row.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        entry_domain = cell_flat[np.repeat(cell_indptr[state.cell_of_row], sizes) + within]
        leaves = np.bincount(entry_row, weights=(counts[entry_domain[:, None], stacks[entry_row]] > target).sum(axis=1),
                             minlength=n)
        meets_here = np.zeros(n)
        for d in cells.domains[here].tolist():
            meets_here += (counts[d][stacks] >= target).sum(axis=1)
        # What the row would meet in every cell.
        met = cells.incidence @ (counts[:, stacks[row]] >= target).sum(axis=1)
        estimate = met[state.cell_of_row] - leaves + meets_here - leaves[row] + rng.random(n) * 0.5
        estimate[state.cell_of_row == here] = np.inf
        estimate[tabu_until > iteration] = np.inf
        best, best_delta = None, None
        for other in np.argsort(estimate)[:exact_checks].tolist():
            if not np.isfinite(estimate[other]):
                break
            delta = _swap_delta(state, row, other)
            if best_delta is None or delta < best_delta:
                best, best_delta = other, delta
        if best is None or best_delta > 0:
            stall += 1
            continue
        there = int(state.cell_of_row[best])
        state.move(np.array([row, best]), np.array([there, here]))
        tabu_until[row] = tabu_until[best] = iteration + tenure + rng.integers(0, 3)
        swaps += 1
        excess += best_delta
        if excess < best_excess:
            best_excess, stall = excess, 0
        else:
            stall += 1
    return swaps


def _swap_delta(state, first, second):
    """Exact change of the excess if rows ``first`` and ``second`` trade cells.

    Only the domains of one of the two cells change: in a domain of the first cell
    only, ``first``'s types lose a holder and ``second``'s gain one; the other way
    round in a domain of the second cell only.
    """
    cells = state.cells
    a, b = int(state.cell_of_row[first]), int(state.cell_of_row[second])
    domains_a, domains_b = set(cells.domains[a].tolist()), set(cells.domains[b].tolist())
    types_first, types_second = set(state.stacks[first].tolist()), set(state.stacks[second].tolist())
    target = state.target
    delta = 0
    for only, leaving, coming in ((domains_a - domains_b, types_first, types_second),
                                  (domains_b - domains_a, types_second, types_first)):
        for d in only:
            row = state.counts[d]
            for t in leaving - coming:
                delta -= int(row[t] > target)
            for t in coming - leaving:
                delta += int(row[t] >= target)
    return delta


def _neighbourhood(state, rng):
    """Rows of a CP-SAT neighbourhood: the cells of some conflicting rows, then random cells."""
    cells = state.cells
    limit = max(2, int(math.sqrt(_NEIGHBOURHOOD_PAIRS / max(1.0, float(cells.capacity.mean())))))
    chosen = []
    over = np.argwhere(state.counts > state.target)
    for domain, shard in over[rng.permutation(len(over))[:8]].tolist():
        for row in state.holders[shard].tolist():
            cell = int(state.cell_of_row[row])
            if domain in cells.domains[cell] and cell not in chosen and len(chosen) < max(1, limit // 2):
                chosen.append(cell)
    for cell in rng.permutation(cells.count).tolist():
        if len(chosen) >= limit:
            break
        if cell not in chosen:
            chosen.append(cell)
    return np.flatnonzero(np.isin(state.cell_of_row, chosen))


def _improve(state, rows, deadline, seed, workers):
    """CP-SAT on the rows ``rows`` (the others fixed): minimise the excess; apply if it improves.

    Returns ``(improved, CP-SAT status name)``.
    """
    from ortools.sat.python import cp_model

    # Data: the freed rows, the cells they occupy (with as many places), the counts of
    # the fixed rows, and which shard types several freed rows hold.
    target = state.target
    cells = np.unique(state.cell_of_row[rows])
    capacity = np.array([np.count_nonzero(state.cell_of_row[rows] == c) for c in cells])
    before = state.excess()
    fixed = state.counts.copy()
    for row in rows.tolist():
        ids = state.cells.domains[state.cell_of_row[row]]
        if ids.size:
            fixed[ids[:, None], state.stacks[row][None, :]] -= 1
    shard_rows = {}
    for i, row in enumerate(rows.tolist()):
        for shard in state.stacks[row].tolist():
            shard_rows.setdefault(shard, []).append(i)
    shared = {shard: members for shard, members in shard_rows.items() if len(members) > 1}
    touched = sorted({int(d) for c in cells.tolist() for d in state.cells.domains[c].tolist()})
    cells_in = {d: [j for j, c in enumerate(cells.tolist()) if d in state.cells.domains[c].tolist()] for d in touched}
    # Linear cost of row i in cell j: full (domain, type) pairs it would overfill, for
    # the types no other freed row holds.
    cost = np.zeros((rows.size, cells.size), dtype=np.int64)
    for j, c in enumerate(cells.tolist()):
        ids = state.cells.domains[c]
        if ids.size == 0:
            continue
        full = fixed[ids] >= target  # (domains of c, N)
        for i, row in enumerate(rows.tolist()):
            types = [t for t in state.stacks[row].tolist() if t not in shared]
            if types:
                cost[i, j] = int(full[:, types].sum())

    # Model
    model = cp_model.CpModel()

    # Variables
    x = {(i, j): model.new_bool_var(f"row_{rows[i]}_cell_{cells[j]}") for i in range(rows.size)
         for j in range(cells.size)}
    excess_terms = []

    # Constraints: every row in one cell, every cell full, excess of the shared types.
    for i in range(rows.size):
        model.add_exactly_one(x[i, j] for j in range(cells.size))
    for j in range(cells.size):
        model.add(sum(x[i, j] for i in range(rows.size)) == int(capacity[j]))
    for shard, members in shared.items():
        for d in touched:
            base = int(fixed[d, shard])
            if base + len(members) <= target:
                continue
            terms = [x[i, j] for i in members for j in cells_in[d]]
            if not terms:
                continue
            over = model.new_int_var(0, len(members), f"excess_{d}_{shard}")
            model.add(over >= base + sum(terms) - target)
            excess_terms.append(over)

    # Objective
    model.minimize(sum(int(cost[i, j]) * x[i, j] for (i, j) in x if cost[i, j]) + sum(excess_terms))

    # Hint: the current assignment.
    current = {c: j for j, c in enumerate(cells.tolist())}
    for i, row in enumerate(rows.tolist()):
        here = current[int(state.cell_of_row[row])]
        for j in range(cells.size):
            model.add_hint(x[i, j], j == here)

    # Solver parameters
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, deadline - time.perf_counter())
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed) % (2 ** 31)
    solver.parameters.interleave_search = workers > 1
    solver.parameters.log_search_progress = False

    # Solve, then check the status before reading any value.
    status = solver.solve(model)
    if status == cp_model.MODEL_INVALID:
        raise SolverError(f"CP-SAT rejected the assignment model: {model.validate()}")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return False, solver.status_name(status)
    new_cells = np.array([cells[next(j for j in range(cells.size) if solver.value(x[i, j]))]
                          for i in range(rows.size)], dtype=np.int64)
    old_cells = state.cell_of_row[rows].copy()
    state.move(rows, new_cells)
    if state.excess() > before:
        state.move(rows, old_cells)
        return False, solver.status_name(status)
    return state.excess() < before, solver.status_name(status)
