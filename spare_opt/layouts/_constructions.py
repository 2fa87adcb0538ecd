"""Known Sidon-set constructions used to seed or replace the CP-SAT search.

A set ``A`` of residues mod ``N`` is a *Sidon set* (a modular Golomb ruler) when all
differences ``a - b`` (``a != b`` in ``A``) are distinct mod ``N``.  Four classic
sources are used here, each only where it is mathematically valid:

* **Optimal Golomb rulers** (integers, all differences distinct): a ruler of length
  ``L`` is a Sidon set mod every ``N > 2 L``, because the positive differences lie in
  ``[1, L]`` and the negative ones in ``[N - L, N - 1]``, which do not meet.
  Table: the proven optimal rulers with up to 28 marks (Wikipedia "Golomb ruler",
  OEIS A003022 for the lengths; 24-28 marks proven by distributed.net, 2004-2022).
* **Singer difference sets** (Singer 1938): for a prime power ``q`` the ``q + 1`` exponents
  ``i`` in ``[0, q^2 + q + 1)`` such that ``alpha^i`` lies in a fixed 2-dimensional
  ``GF(q)``-subspace of ``GF(q^3)`` (``alpha`` primitive) form a perfect difference set
  mod ``q^2 + q + 1``: every nonzero residue is a difference exactly once.
* **Bose sets** (Bose 1942): for a prime power ``q`` the ``q`` exponents ``i`` in
  ``[0, q^2 - 1)`` with ``alpha^i - alpha`` in ``GF(q)`` (``alpha`` primitive in
  ``GF(q^2)``) form a Sidon set mod ``q^2 - 1``.
* **Ruzsa sets** (Ruzsa 1993): for a prime ``p`` and a primitive root ``g`` mod ``p``,
  ``{p i + (p - 1) g^i mod p (p - 1) : i = 1..p-1}`` is a Sidon set of ``p - 1``
  residues mod ``p (p - 1)``.

Valid transfers (and only these) are used: a subset of a Sidon set is a Sidon set; a
translate or a unit multiple of a Sidon set mod ``M`` is a Sidon set mod ``M``; a Sidon
set mod ``M`` is a Sidon set mod every multiple ``N`` of ``M`` (distinct mod ``M``
implies distinct mod ``N``); a Sidon set mod ``M`` whose elements fit in a window of
length ``L`` is a Golomb ruler of length ``L``.  A Sidon set mod ``M`` is *not* in
general one mod an unrelated ``N``: every candidate is verified mod ``N`` by the caller
(:func:`modular_lambda`) before it is used.

References
----------
J. Singer, "A theorem in finite projective geometry and some applications to number
theory", Trans. AMS 43 (1938) 377-385.
R. C. Bose, "An affine analogue of Singer's theorem", J. Indian Math. Soc. 6 (1942) 1-15.
I. Z. Ruzsa, "Solving a linear equation in a set of integers I", Acta Arith. 65 (1993) 259-282.
K. O'Bryant, "A complete annotated bibliography of work related to Sidon sequences",
Electron. J. Combin. DS11 (2004).
"""

import math

import numpy as np

__all__ = [
    "GOLOMB_RULERS",
    "modular_lambda",
    "canonical_offsets",
    "singer_set",
    "bose_set",
    "ruzsa_set",
    "candidate_sets",
]

# Proven optimal Golomb rulers, by number of marks (public values; lengths = OEIS A003022).
GOLOMB_RULERS = {
    1: (0,),
    2: (0, 1),
    3: (0, 1, 3),
    4: (0, 1, 4, 6),
    5: (0, 1, 4, 9, 11),
    6: (0, 1, 4, 10, 12, 17),
    7: (0, 1, 4, 10, 18, 23, 25),
    8: (0, 1, 4, 9, 15, 22, 32, 34),
    9: (0, 1, 5, 12, 25, 27, 35, 41, 44),
    10: (0, 1, 6, 10, 23, 26, 34, 41, 53, 55),
    11: (0, 1, 4, 13, 28, 33, 47, 54, 64, 70, 72),
    12: (0, 2, 6, 24, 29, 40, 43, 55, 68, 75, 76, 85),
    13: (0, 2, 5, 25, 37, 43, 59, 70, 85, 89, 98, 99, 106),
    14: (0, 4, 6, 20, 35, 52, 59, 77, 78, 86, 89, 99, 122, 127),
    15: (0, 4, 20, 30, 57, 59, 62, 76, 100, 111, 123, 136, 144, 145, 151),
    16: (0, 1, 4, 11, 26, 32, 56, 68, 76, 115, 117, 134, 150, 163, 168, 177),
    17: (0, 5, 7, 17, 52, 56, 67, 80, 81, 100, 122, 138, 159, 165, 168, 191, 199),
    18: (0, 2, 10, 22, 53, 56, 82, 83, 89, 98, 130, 148, 153, 167, 188, 192, 205, 216),
    19: (0, 1, 6, 25, 32, 72, 100, 108, 120, 130, 153, 169, 187, 190, 204, 231, 233, 242, 246),
    20: (0, 1, 8, 11, 68, 77, 94, 116, 121, 156, 158, 179, 194, 208, 212, 228, 240, 253, 259, 283),
    21: (0, 2, 24, 56, 77, 82, 83, 95, 129, 144, 179, 186, 195, 255, 265, 285, 293, 296, 310, 329, 333),
    22: (0, 1, 9, 14, 43, 70, 106, 122, 124, 128, 159, 179, 204, 223, 253, 263, 270, 291, 330, 341, 353,
         356),
    23: (0, 3, 7, 17, 61, 66, 91, 99, 114, 159, 171, 199, 200, 226, 235, 246, 277, 316, 329, 348, 350,
         366, 372),
    24: (0, 9, 33, 37, 38, 97, 122, 129, 140, 142, 152, 191, 205, 208, 252, 278, 286, 326, 332, 353, 368,
         384, 403, 425),
    25: (0, 12, 29, 39, 72, 91, 146, 157, 160, 161, 166, 191, 207, 214, 258, 290, 316, 354, 372, 394,
         396, 431, 459, 467, 480),
    26: (0, 1, 33, 83, 104, 110, 124, 163, 185, 200, 203, 249, 251, 258, 314, 318, 343, 356, 386, 430,
         440, 456, 464, 475, 487, 492),
    27: (0, 3, 15, 41, 66, 95, 97, 106, 142, 152, 220, 221, 225, 242, 295, 330, 338, 354, 382, 388, 402,
         415, 486, 504, 523, 546, 553),
    28: (0, 3, 15, 41, 66, 95, 97, 106, 142, 152, 220, 221, 225, 242, 295, 330, 338, 354, 382, 388, 402,
         415, 486, 504, 523, 546, 553, 585),
}

# Largest field size p^degree whose discrete-log table is built (prime-power q).
_MAX_LOG_TABLE = 150_000
# Unit multipliers tried when turning a Singer/Bose set into a short Golomb ruler.
_MAX_MULTIPLIERS = 1500


def modular_lambda(offsets, groups):
    """The largest multiplicity of a nonzero difference of ``offsets`` mod ``groups``.

    Parameters
    ----------
    offsets : sequence of int
        Distinct residues mod ``groups``.
    groups : int
        The modulus ``N``.

    Returns
    -------
    int
        ``lambda``: 0 for fewer than two offsets, 1 exactly for a Sidon set.  For the
        circulant layout with these offsets it equals :meth:`~spare_opt.layouts.layout.Layout.overlap`.
    """
    o = np.asarray(offsets, dtype=np.int64) % groups
    if o.size < 2:
        return 0
    diffs = (o[:, None] - o[None, :]) % groups
    diffs = diffs[~np.eye(o.size, dtype=bool)]
    return int(np.bincount(diffs, minlength=groups).max())


def canonical_offsets(offsets, groups):
    """Rotate and reflect a residue set into the form the CP-SAT model's symmetry breaking expects.

    Translation and reflection (``x -> -x``) preserve every difference multiplicity,
    so the result has the same ``lambda``.  The returned tuple is sorted, starts at 0,
    its wrap-around gap ``N - o[-1]`` is a largest cyclic gap, and its first gap is at
    most its last gap.
    """
    o = np.unique(np.asarray(offsets, dtype=np.int64) % groups)
    if o.size < 2:
        return (0,) * o.size
    gaps = np.diff(np.concatenate((o, [o[0] + groups])))
    # Start right after the first largest gap: that gap becomes the wrap-around gap.
    start = (int(np.argmax(gaps)) + 1) % o.size
    rotated = np.sort((o - o[start]) % groups)
    if rotated.size >= 3 and rotated[1] - rotated[0] > rotated[-1] - rotated[-2]:
        rotated = np.sort(rotated[-1] - rotated)
    return tuple(int(x) for x in rotated)


# ------------------------------------------------------------- number theory
def _is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def _prime_factors(n):
    factors, f = [], 2
    while f * f <= n:
        if n % f == 0:
            factors.append(f)
            while n % f == 0:
                n //= f
        f += 1
    if n > 1:
        factors.append(n)
    return factors


def _divisors(n):
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


# ------------------------------------------------ arithmetic in GF(p)[x] / (f)
def _mulmod(a, b, f, p):
    """Product of two residues mod the monic polynomial ``f`` over GF(p); coefficients low first."""
    degree = len(f) - 1
    product = [0] * (2 * degree - 1)
    for i, ai in enumerate(a):
        if ai:
            for j, bj in enumerate(b):
                product[i + j] = (product[i + j] + ai * bj) % p
    for k in range(len(product) - 1, degree - 1, -1):
        c = product[k]
        if c:
            # x^degree = -(f_0 + ... + f_{degree-1} x^{degree-1})
            for t in range(degree):
                product[k - degree + t] = (product[k - degree + t] - c * f[t]) % p
    return product[:degree]


def _powmod(base, exponent, f, p):
    result = [1] + [0] * (len(f) - 2)
    while exponent:
        if exponent & 1:
            result = _mulmod(result, base, f, p)
        base = _mulmod(base, base, f, p)
        exponent >>= 1
    return result


def _primitive_polynomial(p, degree):
    """The first monic polynomial of ``degree`` over GF(p) (lexicographic order) whose root ``x`` is primitive.

    If ``x`` has multiplicative order ``p^degree - 1`` in ``GF(p)[x]/(f)`` then every
    nonzero residue is a power of ``x``, the ring has no zero divisors and ``f`` is
    irreducible: the quotient is ``GF(p^degree)`` with primitive element ``x``.
    """
    order = p ** degree - 1
    cofactors = [order // factor for factor in _prime_factors(order)]
    x = [0, 1] + [0] * (degree - 2)
    one = [1] + [0] * (degree - 1)
    for code in range(p ** degree):
        low = [(code // p ** t) % p for t in range(degree)]
        if low[0] == 0:
            continue  # x divides f: not irreducible
        f = low + [1]
        if _powmod(x, order, f, p) != one:
            continue
        if all(_powmod(x, c, f, p) != one for c in cofactors):
            return f
    raise ArithmeticError(f"no primitive polynomial of degree {degree} over GF({p})")  # pragma: no cover


def _prime_power(q):
    """``(p, k)`` with ``q = p^k``, ``p`` prime, ``k >= 1``; ``None`` if ``q`` is not a prime power."""
    if q < 2:
        return None
    p = _prime_factors(q)[0]
    k, rest = 0, q
    while rest % p == 0:
        rest //= p
        k += 1
    return (p, k) if rest == 1 else None


def _field_logs(p, degree):
    """Discrete logarithms in ``GF(p^degree) = GF(p)[x]/(f)``, ``x`` primitive.

    Returns ``(log, power)``: ``power[i]`` is ``x^i`` encoded as the integer
    ``sum c_t p^t`` of its coefficients, ``log`` the inverse map.  ``O(p^degree)``.
    """
    f = _primitive_polynomial(p, degree)
    vector = [1] + [0] * (degree - 1)
    power = []
    for _ in range(p ** degree - 1):
        power.append(_encode(vector, p))
        top = vector[-1]
        vector = [0] + vector[:-1]
        if top:
            vector = [(v - top * c) % p for v, c in zip(vector, f)]
    return {code: i for i, code in enumerate(power)}, power


def _encode(vector, p):
    return sum(c * p ** t for t, c in enumerate(vector))


def _add_encoded(a, b, p, degree):
    """Sum of two field elements given as base-``p`` codes (coefficient-wise mod ``p``)."""
    total, scale = 0, 1
    for _ in range(degree):
        total += ((a % p + b % p) % p) * scale
        a, b, scale = a // p, b // p, scale * p
    return total


def _subfield_line(q, extension):
    """Exponents of ``c + alpha`` (``c`` in ``GF(q)``) in ``GF(q^extension)``, for a prime power ``q``.

    ``GF(q) = {0} U {alpha^(j (q^e - 1)/(q - 1))}`` inside ``GF(q^e)``.
    """
    p, k = _prime_power(q)
    degree = k * extension
    log, power = _field_logs(p, degree)
    step = (q ** extension - 1) // (q - 1)
    subfield = [0] + [power[j * step] for j in range(q - 1)]
    alpha = power[1]
    return [log[_add_encoded(c, alpha, p, degree)] for c in subfield]


def singer_set(q):
    """Singer perfect difference set for a prime power ``q``.

    Returns
    -------
    tuple of int
        ``q + 1`` residues mod ``q^2 + q + 1``, sorted; every nonzero residue is a
        difference of exactly one ordered pair.

    Notes
    -----
    ``alpha = x`` is primitive in ``GF(q^3) = GF(q)[x]/(f)``.  The residues
    ``alpha^i`` with zero ``x^2`` coefficient form the 2-dimensional subspace
    ``{a + b x}``; since ``alpha^(q^2+q+1)`` generates ``GF(q)*``, membership depends
    only on ``i mod q^2 + q + 1``, and the ``q + 1`` such ``i`` are a line of
    ``PG(2, q)``: a Singer difference set.  ``O(q^2)`` field operations.  For a
    prime power ``q = p^k`` (``k >= 2``) the field is ``GF(p)[x]/(f)`` with ``deg f =
    3k`` and the line is ``{1} U {c + alpha : c in GF(q)}``, found by a table of
    discrete logarithms: ``O(q^3)`` work, so only small ``q`` are practical.
    """
    if _prime_power(q) is None:
        raise ValueError(f"Singer sets need a prime power q, got {q}")
    modulus = q * q + q + 1
    if not _is_prime(q):
        # Line of PG(2, q) through the points 1 and alpha: {1} U {c + alpha : c in GF(q)}.
        return tuple(sorted({0} | {e % modulus for e in _subfield_line(q, 3)}))
    f = _primitive_polynomial(q, 3)
    c0, c1, c2 = 1, 0, 0  # alpha^0
    members = []
    for i in range(modulus):
        if c2 == 0:
            members.append(i)
        # multiply by x: x^3 = -(f0 + f1 x + f2 x^2)
        c0, c1, c2 = (-c2 * f[0]) % q, (c0 - c2 * f[1]) % q, (c1 - c2 * f[2]) % q
    return tuple(members)


def _primitive_root(p):
    """The least primitive root mod the prime ``p``."""
    if p == 2:
        return 1
    cofactors = [(p - 1) // factor for factor in _prime_factors(p - 1)]
    for g in range(2, p):
        if all(pow(g, c, p) != 1 for c in cofactors):
            return g
    raise ArithmeticError(f"no primitive root mod {p}")  # pragma: no cover


def ruzsa_set(p):
    """Ruzsa Sidon set for a prime ``p``: ``p - 1`` residues mod ``p (p - 1)``, sorted.

    Returns
    -------
    tuple of int
        ``{ p i + (p - 1) g^i mod p (p - 1) : i = 1..p-1 }`` with ``g`` the least
        primitive root mod ``p``.

    Raises
    ------
    ValueError
        ``p`` is not a prime.

    Notes
    -----
    By the Chinese remainder theorem the element ``x_i`` is the residue with
    ``x_i = i mod (p - 1)`` and ``x_i = g^i mod p``.  If ``x_i - x_j = x_k - x_l`` then
    ``i - j = k - l mod (p - 1)`` and ``g^i - g^j = g^k - g^l mod p``; writing
    ``g^i = g^j a``, ``g^k = g^l a`` with ``a = g^(i-j)`` gives ``g^j (a - 1) = g^l (a - 1)``,
    so ``j = l`` (and ``i = k``) unless ``a = 1``, i.e. ``i = j``.  ``O(p)`` work.

    References
    ----------
    I. Z. Ruzsa, "Solving a linear equation in a set of integers I", Acta Arith. 65
    (1993) 259-282; J. Cilleruelo, "Combinatorial problems in finite fields and Sidon
    sets", Combinatorica 32 (2012) 497-511.
    """
    if not _is_prime(p):
        raise ValueError(f"Ruzsa sets need a prime p, got {p}")
    modulus = p * (p - 1)
    if p == 2:
        return (0,)
    g = _primitive_root(p)
    members, power = [], 1
    for i in range(1, p):
        power = power * g % p
        members.append((p * i + (p - 1) * power) % modulus)
    return tuple(sorted(members))


def bose_set(q):
    """Bose Sidon set for a prime power ``q``: ``q`` residues mod ``q^2 - 1``, sorted.

    Notes
    -----
    ``alpha = x`` is primitive in ``GF(q^2) = GF(q)[x]/(f)``; the exponents
    ``i < q^2 - 1`` with ``alpha^i = a + alpha`` (``x`` coefficient 1) form the set.
    For a prime power ``q`` the exponents of ``c + alpha``, ``c`` in ``GF(q)``, are
    read from a table of discrete logarithms of ``GF(q^2)``.
    """
    if _prime_power(q) is None:
        raise ValueError(f"Bose sets need a prime power q, got {q}")
    if not _is_prime(q):
        return tuple(sorted(_subfield_line(q, 2)))
    f = _primitive_polynomial(q, 2)
    modulus = q * q - 1
    c0, c1 = 1, 0
    members = []
    for i in range(modulus):
        if c1 == 1:
            members.append(i)
        c0, c1 = (-c1 * f[0]) % q, (c0 - c1 * f[1]) % q
    return tuple(members)


# ------------------------------------------------------------ candidate sets
def _shortest_window(members, modulus, marks):
    """``marks`` cyclically consecutive members of a set mod ``modulus`` spanning the least length."""
    m = np.sort(np.asarray(members, dtype=np.int64))
    extended = np.concatenate((m, m + modulus))
    spans = extended[marks - 1:marks - 1 + m.size] - extended[:m.size]
    start = int(np.argmin(spans))
    window = extended[start:start + marks]
    return tuple(int(x) for x in window - window[0]), int(spans[start])


def _best_ruler(members, modulus, marks):
    """The shortest Golomb ruler of ``marks`` marks cut from unit multiples of a Sidon set mod ``modulus``."""
    base = np.asarray(members, dtype=np.int64)
    units = [u for u in range(1, modulus) if math.gcd(u, modulus) == 1][:_MAX_MULTIPLIERS]
    scaled = np.sort((np.asarray(units, dtype=np.int64)[:, None] * base[None, :]) % modulus, axis=1)
    extended = np.concatenate((scaled, scaled + modulus), axis=1)
    n = base.size
    spans = extended[:, marks - 1:marks - 1 + n] - extended[:, :n]
    row, start = np.unravel_index(int(np.argmin(spans)), spans.shape)
    window = extended[row, start:start + marks]
    return tuple(int(x) for x in window - window[0]), int(spans[row, start]), units[row]


def _singer_practical(q):
    # Primes: O(q^2) walk.  Other prime powers: O(q^3) discrete-log table (q <= 53).
    return _is_prime(q) or (_prime_power(q) is not None and q ** 3 <= _MAX_LOG_TABLE)


def _bose_practical(q):
    return _is_prime(q) or (_prime_power(q) is not None and q ** 2 <= _MAX_LOG_TABLE)


def candidate_sets(groups, marks):
    """Yield ``(description, offsets)`` candidates that may be Sidon sets of ``marks`` residues mod ``groups``.

    Exact modular constructions first (Singer, Bose, Ruzsa), then rulers.  Every candidate
    is Sidon mod ``groups`` when its description's condition holds (a Golomb ruler of
    length ``L`` needs ``2 L < N``), but callers must still verify it with
    :func:`modular_lambda` (a candidate that fails is still a good solver hint).

    Yields
    ------
    description : str
    offsets : tuple of int
        ``marks`` distinct non-negative integers starting at 0.
    """
    if marks <= 1:
        yield "trivial (one mark)", (0,)
        return
    # Singer / Bose sets mod a divisor M of N are Sidon mod N.
    for modulus in _divisors(groups):
        q = (math.isqrt(4 * modulus - 3) - 1) // 2
        if q * q + q + 1 == modulus and q + 1 >= marks and _singer_practical(q):
            window, _ = _shortest_window(singer_set(q), modulus, marks)
            where = "N" if modulus == groups else f"{modulus}, a divisor of N"
            yield f"Singer difference set, q = {q}, mod {where}", window
        q = math.isqrt(modulus + 1)
        if q * q - 1 == modulus and q >= marks and _bose_practical(q):
            window, _ = _shortest_window(bose_set(q), modulus, marks)
            where = "N" if modulus == groups else f"{modulus}, a divisor of N"
            yield f"Bose set, q = {q}, mod {where}", window
        p = (1 + math.isqrt(4 * modulus + 1)) // 2
        if p * (p - 1) == modulus and p - 1 >= marks and _is_prime(p):
            window, _ = _shortest_window(ruzsa_set(p), modulus, marks)
            where = "N" if modulus == groups else f"{modulus}, a divisor of N"
            yield f"Ruzsa set, p = {p}, mod {where}", window
    if marks in GOLOMB_RULERS:
        ruler = GOLOMB_RULERS[marks]
        # Sidon mod N whenever 2 L < N; sometimes also for smaller N (verified by the caller).
        yield f"optimal Golomb ruler, {marks} marks, length {ruler[-1]}", ruler
    # Beyond the table: short rulers cut from Singer sets (Sidon mod N when 2 L < N).
    if marks > max(GOLOMB_RULERS):
        q = marks - 1
        while not _is_prime(q):
            q += 1
        modulus = q * q + q + 1
        if modulus <= 4 * groups and modulus <= 200_000:
            ruler, length, unit = _best_ruler(singer_set(q), modulus, marks)
            yield f"Golomb ruler of length {length} from the Singer set q = {q} times {unit}", ruler
