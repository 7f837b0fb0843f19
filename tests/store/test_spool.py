"""The spool keeps acknowledged batches across crashes, in order, within its size limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.store import spool as spool_mod
from audit.store.spool import Spool, SpoolBusyError, SpoolDestinationError, SpoolFullError


def payloads(s: Spool) -> list[bytes]:
    out = []
    while (frame := s.peek()) is not None:
        out.append(s.read(frame))
        s.ack(frame)
    return out


def test_frames_survive_reopen_and_come_back_in_order(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    for i in range(5):
        s.append("records", f"batch {i}".encode())
    first = s.peek()
    assert first is not None
    s.ack(first)
    s.close()
    reopened = Spool(tmp_path)
    assert payloads(reopened) == [f"batch {i}".encode() for i in range(1, 5)]
    reopened.close()
    assert payloads(Spool(tmp_path)) == []


@pytest.mark.parametrize("cut", [1, 5, 12, 13], ids=["inside-header", "header-end", "inside-payload", "one-short"])
def test_a_torn_last_frame_is_cut_off_and_appending_continues(tmp_path: Path, cut: int) -> None:
    s = Spool(tmp_path)
    s.append("events", b"complete")
    s.append("events", b"torn-away")
    s.close()
    segment = next(tmp_path.glob("*.seg"))
    size = segment.stat().st_size
    os.truncate(segment, size - len(b"torn-away") - 13 + cut)  # the process died while writing frame 2
    s = Spool(tmp_path)
    s.append("events", b"after restart")
    assert payloads(s) == [b"complete", b"after restart"]


def test_a_corrupted_frame_ends_the_readable_log(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    s.append("records", b"good")
    s.append("records", b"flipped")
    s.close()
    segment = next(tmp_path.glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert payloads(Spool(tmp_path)) == [b"good"]


def test_the_spool_refuses_batches_beyond_its_limit(tmp_path: Path) -> None:
    s = Spool(tmp_path, max_bytes=100, block_seconds=0)
    s.append("records", b"x" * 60)
    with pytest.raises(SpoolFullError, match=r"limit is 100"):
        s.append("records", b"y" * 60)
    frame = s.peek()
    assert frame is not None
    s.ack(frame)  # delivery made room
    s.append("records", b"y" * 60)
    assert payloads(s) == [b"y" * 60]


def test_a_second_writer_on_the_same_spool_is_refused(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    with pytest.raises(SpoolBusyError, match="in use by another writer"):
        Spool(tmp_path)
    s.close()
    Spool(tmp_path).close()


def test_delivered_segments_are_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_mod, "SEGMENT_BYTES", 64)
    s = Spool(tmp_path)
    for i in range(6):
        s.append("records", f"{i:040d}".encode())
    assert len(list(tmp_path.glob("*.seg"))) == 3  # 53-byte frames: two fit before a 64-byte segment rotates
    assert len(payloads(s)) == 6
    assert len(list(tmp_path.glob("*.seg"))) == 1  # only the segment still being appended to


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.binary(max_size=300), min_size=1, max_size=12), acked=st.integers(0, 12),
       segment_bytes=st.sampled_from([50, 400, 1 << 20]))
def test_any_append_ack_reopen_sequence_keeps_exactly_the_unacked_batches(tmp_path_factory, batches: list[bytes],
                                                                         acked: int, segment_bytes: int) -> None:
    directory = tmp_path_factory.mktemp("spool")
    original = spool_mod.SEGMENT_BYTES
    spool_mod.SEGMENT_BYTES = segment_bytes
    try:
        s = Spool(directory)
        for b in batches:
            s.append("records", b)
        for _ in range(min(acked, len(batches))):
            frame = s.peek()
            assert frame is not None
            s.ack(frame)
        s.close()
        assert payloads(Spool(directory)) == batches[min(acked, len(batches)):]
    finally:
        spool_mod.SEGMENT_BYTES = original


STORE_A, STORE_B = "chdb:///data/a/db", "clickhouse://ch.example:8123/audit"


@pytest.mark.parametrize(("first", "pending", "second", "kept"), [
    (STORE_A, 2, STORE_A, 2),  # the same store reopens its own spool
    (STORE_A, 0, STORE_B, 0),  # an empty spool is taken over by whoever opens it
    (None, 2, STORE_B, 2),  # a spool that named no destination is adopted with what it holds
], ids=["same-destination", "empty-spool-taken-over", "unnamed-spool-adopted"])
def test_a_spool_opens_for_a_destination_that_may_have_its_batches(
        tmp_path: Path, first: str | None, pending: int, second: str, kept: int) -> None:
    s = Spool(tmp_path, destination=first)
    for i in range(pending):
        s.append("records", f"batch {i}".encode())
    s.close()
    reopened = Spool(tmp_path, destination=second)
    assert payloads(reopened) == [f"batch {i}".encode() for i in range(kept)]
    reopened.close()
    assert (tmp_path / "destination").read_text() == second + "\n"


def test_batches_for_one_store_are_never_handed_to_another(tmp_path: Path) -> None:
    s = Spool(tmp_path, destination=STORE_A)
    s.append("records", b"meant for a")
    s.append("events", b"also for a")
    s.close()
    with pytest.raises(SpoolDestinationError) as refused:
        Spool(tmp_path, destination=STORE_B)
    assert str(refused.value) == (
        f"spool {tmp_path} holds 2 undelivered batch(es) for {STORE_A}, not {STORE_B}: start a writer for {STORE_A} "
        "to deliver them, or move the spool away")
    # the refusal released the spool and left it whole for its own store
    assert payloads(Spool(tmp_path, destination=STORE_A)) == [b"meant for a", b"also for a"]


def test_a_busy_spool_names_the_destination_its_writer_feeds(tmp_path: Path) -> None:
    first = Spool(tmp_path, destination=STORE_A)
    try:
        with pytest.raises(SpoolBusyError) as busy:
            Spool(tmp_path, destination=STORE_B)
        assert str(busy.value) == (f"spool {tmp_path} is in use by another writer (feeding {STORE_A}) (this or another "
                                   "process); give each writer its own spool")
    finally:
        first.close()
