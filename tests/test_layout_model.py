"""Tests of the Layout model: invariants, overlap, file round trips."""

import json

import numpy as np
import pytest

from spare_opt import Layout, LayoutError, LayoutFileError, OutputExistsError


def circulant(n, offsets):
    return (np.arange(n)[:, None] + np.asarray(offsets)[None, :]) % n


def brute_overlap(stacks):
    sets = [set(row) for row in stacks.tolist()]
    return max((len(a & b) for i, a in enumerate(sets) for b in sets[i + 1:]), default=0)


@pytest.mark.parametrize("n,offsets", [(7, [0, 1, 3]), (13, [0, 1, 3, 9]), (10, [0, 1, 2, 3]), (12, [0, 6]), (5, [0])])
def test_overlap_matches_brute_force(n, offsets):
    with_offsets = Layout(circulant(n, offsets), offsets=offsets)
    without = Layout(circulant(n, offsets))
    expected = brute_overlap(with_offsets.stacks) if n > 1 else 0
    assert with_offsets.overlap() == expected
    assert without.overlap() == expected


def test_random_latin_overlap_matches_brute_force():
    rng = np.random.default_rng(3)
    n, r = 15, 4
    while True:
        stacks = np.stack([rng.permutation(n) for _ in range(r)], axis=1)
        if all(len(set(row)) == r for row in stacks.tolist()):
            break
    assert Layout(stacks).overlap() == brute_overlap(stacks)


def test_holders_are_exactly_r_sorted():
    layout = Layout(circulant(11, [0, 2, 5]))
    indptr, groups = layout.holders()
    for t in range(11):
        holders = groups[indptr[t]:indptr[t + 1]]
        assert len(holders) == 3 and list(holders) == sorted(holders)
        assert all(t in layout.stacks[g] for g in holders)


@pytest.mark.parametrize(
    "stacks,needle",
    [
        ([[0, 0], [1, 1]], "group 0 holds shard type 0 more than once"),
        ([[0, 1], [0, 1]], "layer 0 is not a permutation"),
        ([[0, 2], [1, 0]], "outside [0, 2)"),
        ([[0, -1], [1, 0]], "outside"),
        ([0, 1, 2], "2-D"),
    ],
)
def test_invariant_violations_are_named(stacks, needle):
    with pytest.raises(LayoutError, match=None) as info:
        Layout(stacks)
    assert needle in str(info.value)


def test_offsets_must_generate_stacks():
    with pytest.raises(LayoutError, match="do not generate"):
        Layout(circulant(7, [0, 1, 3]), offsets=[0, 1, 4])


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_round_trip_and_no_clobber(tmp_path, suffix):
    layout = Layout(circulant(9, [0, 1, 3]), method="sidon", offsets=[0, 1, 3], metadata={"seed": 4})
    path = tmp_path / f"layout{suffix}"
    layout.save(path)
    loaded = Layout.load(path)
    assert loaded == layout and loaded.metadata == {"seed": 4}
    before = path.read_bytes()
    with pytest.raises(OutputExistsError):
        Layout(circulant(9, [0, 1, 2])).save(path)
    assert path.read_bytes() == before
    Layout(circulant(9, [0, 1, 2])).save(path, force=True)
    assert Layout.load(path).offsets is None


def test_load_rejects_bad_files(tmp_path):
    with pytest.raises(LayoutFileError, match="does not exist"):
        Layout.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(LayoutFileError, match="malformed JSON"):
        Layout.load(bad)
    doc = Layout(circulant(5, [0, 1])).to_dict()
    for key, value, needle in [("format", "other", "format"), ("version", 2, "version"), ("groups", 6, "shape")]:
        broken = dict(doc, **{key: value})
        bad.write_text(json.dumps(broken))
        with pytest.raises(LayoutFileError, match=needle):
            Layout.load(bad)
    broken = dict(doc, stacks=[[0, 1], [0, 1], [2, 3], [3, 4], [4, 0]])
    bad.write_text(json.dumps(broken))
    with pytest.raises(LayoutError, match="not a permutation"):
        Layout.load(bad)


@pytest.mark.parametrize("stacks", [[[2**70]], [[object()]]])
def test_stacks_numpy_keeps_as_objects_are_named_as_such(stacks):
    # was: "must be a 2-D integer array of shape (N, r), got shape (1, 1)", a shape that is 2-D
    with pytest.raises(LayoutError, match="integer shard types, got values numpy keeps as Python objects"):
        Layout(stacks)
