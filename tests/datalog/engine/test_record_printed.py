"""Records read back from Soufflé's printed form (engine/record_values.py `from_printed`):
`nil` inside a record is the empty record, a symbol that starts with "nil" is a symbol."""

from __future__ import annotations

import pytest

from tprules.datalog.lang.record_values import NIL, from_printed, is_record, parse, printed


@pytest.mark.parametrize("text", ["nil", "[nil]", "[1, nil]", "[nil, 1]", "[1, [2, nil]]", "$Some(nil)",
                                  "$None", "[$Int(3), nil]"])
def test_a_printed_record_reads_back_to_itself(text):
    value = from_printed(text)
    assert is_record(value)
    assert printed(value) == text


def test_nil_in_a_record_is_the_empty_record():
    assert parse(from_printed("[1, nil]"))[1] == (1, NIL)


def test_a_symbol_that_starts_with_nil_is_a_symbol():
    assert from_printed("nilly") == "nilly"
