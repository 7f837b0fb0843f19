"""Stored decision records by id in a SQLite file beside the embedded store, so that a server's read
by id is not an engine query.

A read by id through the embedded engine costs about a millisecond and a half of engine work before
it reads anything (``audit.store.lookups``), and under many readers it waits for a client of the read
pool behind pages and scans (``audit.store.pool``). A B-tree lookup in SQLite takes tens of
microseconds in the reader's own thread, and the ``sqlite3`` module lets go of the interpreter while
it runs.

The index is a copy, never a source. It only ever holds records the engine has already stored: a
writer hands over each batch after its insert has returned, a backfill copies (in id order, resumed
where it stopped) what the store held when the file was made, and a read that missed hands over what
the engine found. A stored record never changes (history is append-only: ``audit.store.history``),
and the store's owner uses the index only while the decisions table has no TTL, so no stored record
leaves the store either: a hit is the engine's own answer, and a miss asks the engine. The file
names the engine table it copies by its UUID and by the highest insert block the table had when the
file was last opened or closed, which only grows: a store made again in the same place, the table
rebuilt by a migration, or a store put back from a backup (the same UUID, an earlier block) finds a
file it cannot trust and starts it again. Whatever the index fails
to take (a crash before its commit, a full hand-over queue, an error of the file) costs misses, not
answers.

Records are kept zlib-compressed (level 1): a 1.3 KB record takes about half the space, and is
unpacked in a few microseconds. With the key twice (table and primary key) and the pages' own
room, a store of 1.5M such records made a file of 1.3 GB.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path

import orjson

log = logging.getLogger(__name__)

FORMAT = "1"  # the layout of the file; a file of another layout is started again
BACKFILL_PAGE = 5_000  # records copied from the engine per query and per transaction
MAX_PENDING_BYTES = 64 << 20  # batches handed over and not indexed yet; beyond, new ones are skipped

# (after this id, at most n) -> (decision id, tenant, record text) in id order
PageReader = Callable[[str, int], list[tuple[str, str, str]]]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records (decision_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, record BLOB NOT NULL)",
)


class IdIndex:
    """The SQLite file: one writing connection (used by one thread at a time) and one reading
    connection per reader thread."""

    def __init__(self, path: Path, table_uuid: str, blocks: int) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = self._opened(table_uuid, blocks)
        except sqlite3.DatabaseError as exc:  # a damaged file holds nothing that cannot be copied again
            log.warning("decision id index %s unreadable (%s); starting it again", path, exc)
            self.remove(path)
            self._writer = self._opened(table_uuid, blocks)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def _opened(self, table_uuid: str, blocks: int) -> sqlite3.Connection:
        conn = self._connect()
        try:
            return self._checked(conn, table_uuid, blocks)
        except sqlite3.DatabaseError:
            conn.close()
            raise

    def _checked(self, conn: sqlite3.Connection, table_uuid: str, blocks: int) -> sqlite3.Connection:
        conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        for statement in _SCHEMA:
            conn.execute(statement)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        # the table's highest insert block never goes down, but a store put back from a backup in
        # the same place has the same UUID and an earlier block: the index may hold what it lacks
        if meta.get("format") != FORMAT or meta.get("table") != table_uuid or int(meta.get("blocks", 0)) > blocks:
            if meta:
                log.info("decision id index %s copies another table, an earlier state of it or another layout; "
                         "starting it again", self.path)
            with conn:
                conn.execute("BEGIN")
                conn.execute("DELETE FROM records")
                conn.execute("DELETE FROM meta")
                conn.executemany("INSERT INTO meta VALUES (?, ?)",
                                 [("format", FORMAT), ("table", table_uuid), ("backfill_after", "")])
        self._set_blocks(conn, blocks)
        return conn

    @staticmethod
    def _set_blocks(conn: sqlite3.Connection, blocks: int) -> None:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('blocks', ?)", (str(blocks),))

    def mark_blocks(self, blocks: int) -> None:
        """Remember the table's highest insert block now: a table found later with a lower one is an
        earlier state of it (a store put back from a backup)."""
        self._set_blocks(self._writer, blocks)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        # a lost commit costs misses, never a wrong answer: WAL with NORMAL keeps the file whole
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    @staticmethod
    def remove(path: Path) -> None:
        """Remove the index file at ``path``, if any, with its write-ahead log."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    # reading ----------------------------------------------------------------------------------
    def get(self, decision_id: str) -> tuple[str, str] | None:
        """(tenant, record text) of ``decision_id`` if the index holds it."""
        row = self._reader().execute("SELECT tenant, record FROM records WHERE decision_id = ?",
                                     (decision_id,)).fetchone()
        return None if row is None else (str(row[0]), zlib.decompress(row[1]).decode())

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def count(self) -> int:
        return int(self._reader().execute("SELECT count(*) FROM records").fetchone()[0])

    # writing (one thread) -----------------------------------------------------------------------
    def add(self, rows: list[tuple[str, str, str]], backfill_after: str | None = None) -> None:
        """Add (decision id, tenant, record text) rows, the first copy of an id kept; with
        ``backfill_after``, the backfill has copied every id up to it ("": all of them) in the same
        transaction."""
        packed = [(d, t, zlib.compress(text.encode(), 1)) for d, t, text in rows]
        conn = self._writer
        with conn:
            conn.execute("BEGIN")
            conn.executemany("INSERT OR IGNORE INTO records VALUES (?, ?, ?)", packed)
            if backfill_after is not None:
                conn.execute("UPDATE meta SET value = ? WHERE key = 'backfill_after'", (backfill_after,))
                if backfill_after == "":
                    conn.execute("INSERT OR REPLACE INTO meta VALUES ('backfilled', '1')")

    def backfill_from(self) -> str | None:
        """The id the backfill goes on after ("": the start), or None once it has copied everything."""
        meta = dict(self._writer.execute("SELECT key, value FROM meta").fetchall())
        return None if meta.get("backfilled") == "1" else meta.get("backfill_after", "")

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._writer.close()


def parsed_rows(lines: list[bytes]) -> list[tuple[str, str, str]]:
    """(decision id, tenant, text) of stored records given as their JSON lines."""
    out = []
    for line in lines:
        record = orjson.loads(line)
        out.append((str(record["decision_id"]), str(record["tenant"]), line.decode()))
    return out


class IdIndexKeeper:
    """The thread that fills an ``IdIndex``: batches writers stored, records reads found in the
    engine, and, while nothing else is due, the backfill's next page."""

    def __init__(self, index: IdIndex, read_page: PageReader, page: int = BACKFILL_PAGE,
                 max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self.index = index
        self._read_page = read_page
        self._page = page
        self._max_pending = max_pending_bytes
        self._due: deque[tuple[list[bytes], int]] = deque()  # (lines, their bytes)
        self._pending_bytes = 0
        self._cond = threading.Condition()
        self._closed = False
        self._busy = False
        self.after = index.backfill_from()  # None once the backfill is complete
        self.hits = self.misses = self.skipped = self.errors = 0
        self._counts = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="claimtrail-id-index", daemon=True)
        self._thread.start()

    # from other threads ---------------------------------------------------------------------------
    def get(self, decision_id: str) -> tuple[str, str] | None:
        """(tenant, record text) from the index, or None: not held, or the file failed (logged)."""
        try:
            found = self.index.get(decision_id)
        except sqlite3.Error as exc:
            log.warning("decision id index read failed (%s); the store answers", exc)
            found, failed = None, True
        else:
            failed = False
        with self._counts:
            if failed:
                self.errors += 1
            elif found is None:
                self.misses += 1
            else:
                self.hits += 1
        return found

    def stored(self, lines: list[bytes]) -> None:
        """Records now stored by the engine, as their JSON lines: indexed soon, in this order."""
        size = sum(len(line) for line in lines)
        with self._cond:
            if self._pending_bytes + size > self._max_pending:
                with self._counts:
                    self.skipped += len(lines)  # misses later, answered by the engine
                return
            self._due.append((lines, size))
            self._pending_bytes += size
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until everything handed over is indexed and the backfill is complete."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed or (not self._due and not self._busy
                                                                and self.after is None), timeout)

    def close(self, blocks: int | None = None) -> None:
        """Index what was handed over, stop the backfill where it is, and close the file; with
        ``blocks``, remember it as the table's highest insert block now (``IdIndex.mark_blocks``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        if blocks is not None:
            self.index.mark_blocks(blocks)
        self.index.close()

    # the keeper's thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._due or self.after is not None)
                if self._closed and not self._due:
                    return
                lines: list[bytes] | None = None
                if self._due:
                    lines, size = self._due.popleft()
                    self._pending_bytes -= size
                self._busy = True
            try:
                if lines is not None:
                    self.index.add(parsed_rows(lines))
                else:
                    self._backfill_page()
            except Exception as exc:  # noqa: BLE001 - the index only loses hits; the server goes on
                with self._counts:
                    self.errors += 1
                log.warning("decision id index: %s; the store answers what it lacks", exc)
                if lines is None:  # the engine or the file failed the backfill: try again later
                    with self._cond:
                        self._cond.wait(5.0)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _backfill_page(self) -> None:
        after = self.after
        assert after is not None
        rows = self._read_page(after, self._page)
        done = len(rows) < self._page
        self.index.add(rows, backfill_after="" if done else rows[-1][0])
        with self._cond:
            self.after = None if done else rows[-1][0]
