"""The count of inserts of decisions per embedded store: begun and ended, failed ones too."""

from __future__ import annotations

import pytest

from audit.store.generation import WriteGenerations


def test_an_insert_counts_as_begun_while_it_runs_and_as_ended_after() -> None:
    counts = WriteGenerations()
    assert counts.current("/s") == (0, 0)
    with counts.writing("/s"):
        assert counts.current("/s") == (1, 0)
    assert counts.current("/s") == (1, 1)


def test_a_failed_insert_ends_too_since_part_of_it_may_be_stored() -> None:
    counts = WriteGenerations()
    with pytest.raises(OSError), counts.writing("/s"):
        raise OSError("store gone")
    assert counts.current("/s") == (1, 1)


def test_each_directory_has_its_own_count_and_a_server_store_none() -> None:
    counts = WriteGenerations()
    with counts.writing("/a"), counts.writing(None):
        pass
    assert (counts.current("/a"), counts.current("/b")) == ((1, 1), (0, 0))
