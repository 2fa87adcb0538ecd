"""Failure sets written by users: parse_group_ids and read_failure_set raise FailureSetError."""

import pytest

from spare_opt import FailureSetError
from spare_opt.planning.failure_sets import parse_group_ids, read_failure_set


@pytest.mark.parametrize("text,expected", [("3,17,42", [3, 17, 42]), (" 1 2\n3 ", [1, 2, 3]), ("4, 5 6", [4, 5, 6])])
def test_parse_group_ids(text, expected):
    assert parse_group_ids(text) == expected


@pytest.mark.parametrize("text", ["", "  ", "1,,2", "1,2,", "1_0", "3.0", "x", "\u0661"])
def test_parse_group_ids_refuses_typos(text):
    with pytest.raises(FailureSetError):
        parse_group_ids(text)


@pytest.mark.parametrize("content,expected", [("[1, 2, 3]", [1, 2, 3]), ("[]", []), ("5 6,7", [5, 6, 7])])
def test_read_failure_set(tmp_path, content, expected):
    path = tmp_path / "failed.txt"
    path.write_text(content)
    assert read_failure_set(path) == expected


@pytest.mark.parametrize("content,needle", [
    ("", "holds no group ids"),
    ('{"a": 1}', "expected a JSON list"),
    ("[1, 2.5]", "not an integer"),
    ("[1, true]", "not an integer"),
    ("[1,", "malformed JSON"),
    ("1,,2", "empty group id"),
])
def test_read_failure_set_refuses_bad_files(tmp_path, content, needle):
    path = tmp_path / "failed.txt"
    path.write_text(content)
    with pytest.raises(FailureSetError, match=needle):
        read_failure_set(path)
    with pytest.raises(FailureSetError, match="does not exist"):
        read_failure_set(tmp_path / "missing.txt")
