"""The one JSON writer: ``flat_records`` writes a list of flat objects one object per line, the same JSON."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spare_opt import SpareError
from spare_opt._core.io import dumps_json

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
records = st.lists(st.dictionaries(st.text(max_size=4), scalars, max_size=4), max_size=6)
documents = st.recursive(st.one_of(scalars, records),
                         lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                 st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                         max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(documents)
def test_flat_records_is_the_same_json(document):
    assert json.loads(dumps_json(document, flat_records=True)) == json.loads(dumps_json(document))


def test_flat_records_puts_each_row_on_a_line_and_converts_numpy():
    doc = {"wipe_outs": np.int64(2), "days": np.array([1.5, 2.0]),
           "rows": [{"index": i, "moves": np.int32(i * 2), "status": "masked"} for i in range(3)]}
    text = dumps_json(doc, flat_records=True)
    assert json.loads(text) == {"wipe_outs": 2, "days": [1.5, 2.0],
                                "rows": [{"index": i, "moves": 2 * i, "status": "masked"} for i in range(3)]}
    lines = text.splitlines()
    assert sum('"index"' in line for line in lines) == 3 and len(lines) == 9
    with pytest.raises(SpareError, match="NaN or infinite"):
        dumps_json({"rows": [{"x": float("nan")}]}, flat_records=True)
