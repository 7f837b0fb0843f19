"""Batches reach the disk (fsync) before the store is tried and before flush() returns, without
the producer waiting for the disk on every batch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from audit.store import spool as spool_mod
from audit.store.spool import Spool
from audit.store.writer import RecordWriter
from tests.store.factory import make_records


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fsync the spool makes (the real call still happens)."""
    calls: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(spool_mod.os, "fsync", spy)
    return calls


def test_an_unsynced_append_is_fsynced_once_by_sync(tmp_path: Path, fsyncs: list[int]) -> None:
    s = Spool(tmp_path)
    s.append("records", b"one", sync=False)
    s.append("records", b"two", sync=False)
    assert fsyncs == []
    s.sync()
    assert len(fsyncs) == 1
    s.sync()  # nothing new since
    assert len(fsyncs) == 1
    s.append("records", b"three")  # the default stays a synchronous append
    assert len(fsyncs) == 2
    s.close()
    assert [p.read_bytes().count(b"three") for p in tmp_path.glob("*.seg")] == [1]


def test_leaving_a_segment_fsyncs_it_first(tmp_path: Path, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_mod, "SEGMENT_BYTES", 64)
    s = Spool(tmp_path)
    s.append("records", b"x" * 60, sync=False)
    assert fsyncs == []
    s.append("records", b"y" * 60, sync=False)  # rotates: the first segment is synced, then the directory
    assert len(fsyncs) == 2
    s.close()


def test_a_flush_with_the_store_away_returns_with_the_batch_on_disk(tmp_path: Path, fsyncs: list[int]) -> None:
    def unreachable() -> None:
        raise ConnectionError("store is away")

    writer = RecordWriter(unreachable, str(tmp_path / "spool"), batch_size=10, background=False)
    writer.write_records(make_records(25))  # two full batches cut and appended without fsync
    assert fsyncs == []
    assert writer.flush() is False  # the third batch is cut, everything synced, the store still away
    assert len(fsyncs) >= 1 and writer.spool._unsynced is False
    assert writer.stats()["spool_batches"] == 3
    writer.close()
