"""A durable, bounded, append-only spool of batches waiting to reach ClickHouse.

Frames are appended to segment files; a written frame survives ``kill -9`` (its bytes belong to
the operating system), and it survives power loss once fsync'ed: at its append by default, or —
for a writer that appends with ``sync=False`` to keep the disk off its producers' path — at the
next ``sync()``, when its segment is left, and at ``close``. A frame is
``magic | kind | payload length | crc32 | payload``; a torn frame at the tail (the process died
while writing it — that batch was never acknowledged) is cut off on reopen. The position of the
oldest undelivered frame is kept in ``ack`` (written to a temporary file and renamed),
so delivery resumes in order after a restart (written lazily and not fsync'ed: see ``ack``).
Fully delivered segments are deleted.

Back-pressure: an append that would push undelivered bytes past ``max_bytes`` waits up to
``block_seconds`` for delivery to make room, then raises ``SpoolFullError`` naming the spool
and its limit; nothing is ever dropped silently.

A spool opened for a destination (a store's DSN, an API's URL) records it in ``destination`` and
refuses to open for another while it holds undelivered batches (``SpoolDestinationError``).
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import UserError

MAGIC = b"CTS1"
_HEADER = struct.Struct(">4sBII")  # magic, kind, payload length, crc32
KINDS = {"records": 1, "events": 2, "quarantine": 3}
_KIND_NAMES = {v: k for k, v in KINDS.items()}
SEGMENT_BYTES = 64 * 2**20
ACK_PERSIST_SECONDS = 1.0


class SpoolBusyError(UserError):
    """Another process holds the spool directory."""


class SpoolDestinationError(UserError):
    """The spool holds batches for another store or API than the writer opening it."""


class SpoolFullError(UserError):
    """The spool reached its size limit: the store has been unreachable or slow for too long."""


@dataclass(frozen=True)
class Frame:
    """Where one spooled batch lives; ``payload`` is read on demand."""

    segment: int
    offset: int
    end: int
    kind: str

    @property
    def position(self) -> tuple[int, int]:
        return (self.segment, self.offset)

    @property
    def size(self) -> int:
        return self.end - self.offset


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, directory: str | os.PathLike[str], max_bytes: int = 1 << 30,
                 block_seconds: float = 30.0, destination: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.block_seconds = block_seconds
        self._lock_fh = _lock_directory(self.directory)
        self._cond = threading.Condition()
        self._ack_lock = threading.Lock()  # one writer of the ack file at a time, in ack order
        self._sync_lock = threading.Lock()
        self._unsynced = False  # appended bytes not yet fsync'ed
        self._acked: Frame | None = None  # the last frame acknowledged
        self._persisted: Frame | None = None  # the last one written to the ack file
        self._ack_written_at = 0.0
        self._pending: deque[Frame] = deque()
        self._pending_bytes = 0
        self._load()
        if destination is not None:
            try:
                self._claim(destination)
            except BaseException:
                self._lock_fh.close()
                raise
        self._fh = open(self._path(self._segment), "ab")  # noqa: SIM115 - lives as long as the spool

    # opening ------------------------------------------------------------------------------
    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:08d}.seg"

    def _segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob("*.seg") if p.stem.isdigit())

    def _load(self) -> None:
        try:
            seg_text, off_text = (self.directory / "ack").read_text().split()
            ack_segment, ack_offset = int(seg_text), int(off_text)
        except FileNotFoundError:
            ack_segment, ack_offset = 0, 0
        segments = self._segments()
        for seg in segments:
            data = self._path(seg).read_bytes()
            good = 0
            for frame in _parse(seg, data):
                good = frame.end
                if (seg, frame.offset) >= (ack_segment, ack_offset):
                    self._pending.append(frame)
                    self._pending_bytes += frame.size
            if good < len(data):  # a torn tail: that batch was never acknowledged to its producer
                with open(self._path(seg), "r+b") as fh:
                    fh.truncate(good)
                    os.fsync(fh.fileno())
        self._segment = max(segments, default=ack_segment)
        self._first_kept = min(segments, default=ack_segment)  # segments below it are deleted

    def _claim(self, destination: str) -> None:
        """Record where this spool's batches go. A spool's location is derived from a data
        directory, not from the store it feeds, so a writer for another store (another DSN under
        the same ``CLAIMTRAIL_DATA_DIR``, a sibling embedded store) may open one that still holds
        batches meant elsewhere: delivering them would write one store's history into another."""
        path = self.directory / "destination"
        try:
            recorded = path.read_text().strip()
        except FileNotFoundError:
            recorded = ""  # a new spool, or one written before spools recorded their destination
        if recorded == destination:
            return
        if recorded and self._pending:
            raise SpoolDestinationError(
                f"spool {self.directory} holds {len(self._pending)} undelivered batch(es) for {recorded}, not "
                f"{destination}: start a writer for {recorded} to deliver them, or move the spool away")
        tmp = path.with_name("destination.tmp")
        tmp.write_text(destination + "\n")
        os.replace(tmp, path)

    # producer side ------------------------------------------------------------------------
    def append(self, kind: str, payload: bytes, on_frame: Callable[[Frame], None] | None = None,
               sync: bool = True) -> Frame:
        """Append one batch. With ``sync`` it is fsync'ed before this returns; without, it is
        durable after the next ``sync()`` (once written, the bytes belong to the operating system,
        so a crash of this process alone loses nothing either way). ``on_frame`` is called with
        the new frame before any reader can see it."""
        header = _HEADER.pack(MAGIC, KINDS[kind], len(payload), zlib.crc32(payload))
        size = len(header) + len(payload)
        with self._cond:
            deadline = time.monotonic() + self.block_seconds
            while self._pending and self._pending_bytes + size > self.max_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SpoolFullError(
                        f"spool {self.directory}: {self._pending_bytes} bytes wait for the store and the limit "
                        f"is {self.max_bytes}; the batch was not accepted (the store is unreachable or too slow)"
                    )
                self._cond.wait(left)
            if self._fh.tell() >= SEGMENT_BYTES:
                if self._unsynced:  # the segment being left must be as durable as the rest
                    os.fsync(self._fh.fileno())
                    self._unsynced = False
                self._fh.close()
                self._segment += 1
                self._fh = open(self._path(self._segment), "ab")  # noqa: SIM115
                _fsync_dir(self.directory)
            offset = self._fh.tell()
            self._fh.write(header)
            self._fh.write(payload)
            self._fh.flush()
            if sync:
                os.fsync(self._fh.fileno())
            else:
                self._unsynced = True
            frame = Frame(self._segment, offset, offset + size, kind)
            if on_frame is not None:
                on_frame(frame)
            self._pending.append(frame)
            self._pending_bytes += size
            self._cond.notify_all()
            return frame

    def sync(self) -> None:
        """fsync every batch appended so far. The lock held across the fsync makes a second caller
        wait for one already in progress rather than return before the bytes are on disk."""
        with self._sync_lock:
            with self._cond:
                if not self._unsynced:
                    return
                fd = os.dup(self._fh.fileno())  # stays valid if a producer rotates the segment meanwhile
                self._unsynced = False
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # delivery side ------------------------------------------------------------------------
    def peek(self) -> Frame | None:
        with self._cond:
            return self._pending[0] if self._pending else None

    def wait_for_frame(self, timeout: float) -> Frame | None:
        with self._cond:
            if not self._pending:
                self._cond.wait(timeout)
            return self._pending[0] if self._pending else None

    def read(self, frame: Frame) -> bytes:
        with open(self._path(frame.segment), "rb") as fh:
            fh.seek(frame.offset + _HEADER.size)
            return fh.read(frame.end - frame.offset - _HEADER.size)

    def ack(self, frame: Frame) -> None:
        """Mark the oldest frame delivered; delete segments nobody needs any more.

        The position file is replaced atomically, but only when the spool runs empty, when the
        ack leaves a segment behind (which can then be deleted), at most ``ACK_PERSIST_SECONDS``
        apart otherwise, and on ``close``; it is not fsync'ed, and never written under the lock
        producers append under. An ack lost to a crash or power cut only makes delivery resend
        batches the store already has, which their deduplication tokens and ReplacingMergeTree
        absorb, while writing it after every insert put file system calls — each a wait for the
        interpreter lock while producers encode — between one insert and the next."""
        with self._cond:
            if not self._pending or self._pending[0] != frame:
                raise RuntimeError(f"spool {self.directory}: ack out of order at {frame.position}")
            self._pending.popleft()
            self._pending_bytes -= frame.size
            self._acked = frame
            idle = not self._pending
            self._cond.notify_all()
        if idle or frame.segment > self._first_kept or time.monotonic() - self._ack_written_at >= ACK_PERSIST_SECONDS:
            self._persist_ack(frame)

    def _persist_ack(self, frame: Frame) -> None:
        with self._ack_lock:
            if self._persisted is not None and self._persisted.position >= frame.position:
                return  # a later ack was written meanwhile
            tmp = self.directory / "ack.tmp"
            with open(tmp, "w") as fh:
                fh.write(f"{frame.segment} {frame.end}")
            os.replace(tmp, self.directory / "ack")
            self._persisted = frame
            self._ack_written_at = time.monotonic()
            if frame.segment > self._first_kept:  # a segment was left behind: list and delete
                for seg in self._segments():
                    if seg < frame.segment:
                        self._path(seg).unlink()
                self._first_kept = frame.segment

    def pending_bytes(self) -> int:
        with self._cond:
            return self._pending_bytes

    def pending_frames(self) -> int:
        with self._cond:
            return len(self._pending)

    def wait_empty(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        self.sync()
        if self._acked is not None:
            self._persist_ack(self._acked)
        with self._cond:
            self._fh.close()
            self._lock_fh.close()  # releases the flock


def _lock_directory(directory: Path) -> Any:
    """One writer per spool: two processes appending to the same segments would interleave frames."""
    fh = open(directory / "lock", "a+")  # noqa: SIM115 - held until close()
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        try:
            feeding = f" (feeding {(directory / 'destination').read_text().strip()})"
        except FileNotFoundError:
            feeding = ""
        raise SpoolBusyError(f"spool {directory} is in use by another writer{feeding} (this or another process); "
                             "give each writer its own spool") from None
    return fh


def _parse(segment: int, data: bytes) -> list[Frame]:
    frames: list[Frame] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        magic, kind, length, crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if magic != MAGIC or kind not in _KIND_NAMES or end > len(data):
            break
        if zlib.crc32(data[pos + _HEADER.size:end]) != crc:
            break
        frames.append(Frame(segment, pos, end, _KIND_NAMES[kind]))
        pos = end
    return frames
