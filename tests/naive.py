"""Slow, obviously-correct references for the tests (import with ``from naive import ...``).

Everything here is plain Python over small inputs: brute force over subsets or over
assignments, no graph library.  Fast paths in ``spare_opt`` are asserted equal to these.

Layout builders are also here (circulant, block, random Latin rectangle) so that tests do
not depend on ``spare_opt.layouts.generators``.
"""

import itertools
import math

import numpy as np

__all__ = [
    "circulant_stacks",
    "block_stacks",
    "random_latin_stacks",
    "naive_lost_shards",
    "naive_least_stack_number",
    "naive_least_stack_number_by_assignment",
    "naive_min_moves",
    "naive_patch_types",
    "naive_least_load",
    "naive_least_load_by_split",
    "naive_min_split_moves",
    "naive_domains",
    "naive_domain_multiplicity",
    "naive_is_domain_safe",
]


# ------------------------------------------------------------------ layouts
def circulant_stacks(n, offsets):
    """``stacks[g, l] = (g + offsets[l]) mod n`` (offsets distinct, in ``[0, n)``)."""
    return np.array([[(g + o) % n for o in offsets] for g in range(n)], dtype=np.int32)


def block_stacks(n, r):
    """Blocks of ``r`` groups holding the same ``r`` shard types, rotated per layer (``r`` divides ``n``)."""
    assert n % r == 0
    return np.array([[(g // r) * r + (g % r + l) % r for l in range(r)] for g in range(n)], dtype=np.int32)


def random_latin_stacks(n, r, rng):
    """A random ``n x r`` Latin rectangle with rows of distinct shard types.

    Layer by layer, random permutations are drawn until one clashes with no row; after
    many rejections, a circulant rectangle with random offsets and random relabelling of
    groups and shard types is returned instead (still a valid layout).
    """
    rows = [[] for _ in range(n)]
    for _ in range(r):
        for _attempt in range(2000):
            perm = rng.permutation(n)
            if all(int(perm[g]) not in rows[g] for g in range(n)):
                break
        else:
            offsets = [0] + sorted(int(o) for o in rng.choice(np.arange(1, n), r - 1, replace=False))
            stacks = circulant_stacks(n, offsets)
            relabel = rng.permutation(n)
            return relabel[stacks[rng.permutation(n)]].astype(np.int32)
        for g in range(n):
            rows[g].append(int(perm[g]))
    return np.array(rows, dtype=np.int32)


# ------------------------------------------------------------- references
def _live_holders(stacks, failed):
    n = len(stacks)
    dead = set(int(g) for g in failed)
    return [[g for g in range(n) if g not in dead and t in [int(x) for x in stacks[g]]] for t in range(n)]


def naive_lost_shards(stacks, failed):
    """Shard types none of whose holders is live."""
    return [t for t, holders in enumerate(_live_holders(stacks, failed)) if not holders]


def naive_least_stack_number(stacks, failed):
    """``S* = max over non-empty sets T of shard types of ceil(|T| / |live holders of T|)`` (Hall).

    Enumerates all ``2^N - 1`` sets: use for ``N <= 12``.  ``None`` on a wipe-out.
    """
    n = len(stacks)
    holders = _live_holders(stacks, failed)
    if any(not h for h in holders):
        return None
    best = 0
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            neighbours = set()
            for t in subset:
                neighbours.update(holders[t])
            best = max(best, math.ceil(size / len(neighbours)))
    return best


def _assignments(stacks, failed):
    """Every assignment (tuple: type -> live holder), by the product of the holder lists."""
    return itertools.product(*_live_holders(stacks, failed))


def naive_least_stack_number_by_assignment(stacks, failed):
    """``S*`` as the least largest load over all assignments (``r^N`` of them: tiny ``N``)."""
    if naive_lost_shards(stacks, failed):
        return None
    n = len(stacks)
    return min(max(np.bincount(a, minlength=n)) for a in _assignments(stacks, failed))


def naive_min_moves(stacks, failed, order, s):
    """Least number of types outside their group's top ``s`` of ``order``, over assignments with loads <= ``s``.

    ``None`` when no assignment has loads <= ``s`` (or on a wipe-out).
    """
    if naive_lost_shards(stacks, failed):
        return None
    n = len(stacks)
    tops = [set(int(x) for x in order[g][:s]) for g in range(n)]
    best = None
    for a in _assignments(stacks, failed):
        loads = [0] * n
        for g in a:
            loads[g] += 1
        if max(loads) > s:
            continue
        moves = sum(1 for t, g in enumerate(a) if t not in tops[g])
        if best is None or moves < best:
            best = moves
    return best


def naive_patch_types(stacks, failed, mid_step, order, s):
    """Types that the mid-step failures produced and nobody else did (empty if no mid-step failure).

    Groups live before this event are those not failed or failed mid-step; a type needs
    patching when every such group that had it in its top ``s`` of ``order`` is in ``mid_step``.
    """
    mid = set(int(g) for g in mid_step)
    if not mid:
        return []
    dead_before = set(int(g) for g in failed) - mid
    n = len(stacks)
    patch = []
    for t in range(n):
        producers = [g for g in range(n) if g not in dead_before and t in [int(x) for x in order[g][:s]]]
        if all(g in mid for g in producers):
            patch.append(t)
    return patch


# ------------------------------------------------------------ micro-batches
def naive_least_load(stacks, failed, m):
    """``L* = max over non-empty sets T of ceil(m |T| / |live holders of T|)`` (Hall with capacities).

    Enumerates all ``2^N - 1`` sets: use for ``N <= 12``.  ``None`` on a wipe-out.
    """
    n = len(stacks)
    holders = _live_holders(stacks, failed)
    if any(not h for h in holders):
        return None
    best = 0
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            neighbours = set()
            for t in subset:
                neighbours.update(holders[t])
            best = max(best, math.ceil(m * size / len(neighbours)))
    return best


def _compositions(total, parts):
    """Every tuple of ``parts`` non-negative integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first,) + rest


def _count_splits(stacks, failed, m):
    """Every split as counts: per type, how many of its ``m`` micro-batches each live holder computes."""
    holders = _live_holders(stacks, failed)
    per_type = [[dict(zip(h, c)) for c in _compositions(m, len(h))] for h in holders]
    return itertools.product(*per_type)


def _loads(n, split_counts):
    loads = [0] * n
    for counts in split_counts:
        for g, c in counts.items():
            loads[g] += c
    return loads


def naive_least_load_by_split(stacks, failed, m):
    """``L*`` as the least largest load over every split (tiny ``N`` and ``m`` only)."""
    if naive_lost_shards(stacks, failed):
        return None
    n = len(stacks)
    return min(max(_loads(n, s)) for s in _count_splits(stacks, failed, m))


def naive_min_split_moves(stacks, failed, m, previous_split, load):
    """Least number of micro-batches whose contributor differs from ``previous_split`` (N, m),
    over every split with loads at most ``load``; ``None`` when there is none.

    Micro-batches of one type are interchangeable: a split with counts ``c[t][g]`` keeps at
    most ``sum_g min(c[t][g], previous count)`` micro-batches of ``t`` in place, and that
    many can always keep their index.
    """
    if naive_lost_shards(stacks, failed):
        return None
    n = len(stacks)
    previous = [[int(g) for g in row] for row in previous_split]
    best = None
    for split_counts in _count_splits(stacks, failed, m):
        if max(_loads(n, split_counts)) > load:
            continue
        kept = sum(min(c, previous[t].count(g)) for t, counts in enumerate(split_counts) for g, c in counts.items())
        moves = n * m - kept
        if best is None or moves < best:
            best = moves
    return best


# ------------------------------------------------------------ failure domains
def naive_domains(levels_doc, levels):
    """Domains of a topology's ``levels`` document as a list of ``(level, label, set of groups)``.

    ``levels_doc`` is the ``levels`` object of a ``spare-topology`` document: read the
    entries one by one (a label, a list of labels, or an empty list).
    """
    found = {}
    for level in levels:
        for g, entry in enumerate(levels_doc[level]):
            labels = entry if isinstance(entry, list) else [entry]
            for label in labels:
                found.setdefault((level, label), set()).add(g)
    return [(level, label, groups) for (level, label), groups in found.items()]


def naive_domain_multiplicity(stacks, domains):
    """Most holders of one shard type inside one domain, by counting every domain's rows."""
    worst = 0
    for _level, _label, groups in domains:
        counts = {}
        for g in groups:
            for t in stacks[g]:
                counts[int(t)] = counts.get(int(t), 0) + 1
        worst = max([worst] + list(counts.values()))
    return worst


def naive_is_domain_safe(stacks, domains):
    """Whether every two groups of every domain hold disjoint sets of shard types (pairwise check)."""
    for _level, _label, groups in domains:
        for g, h in itertools.combinations(sorted(groups), 2):
            if set(stacks[g].tolist()) & set(stacks[h].tolist()):
                return False
    return True
