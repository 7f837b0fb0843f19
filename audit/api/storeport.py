"""The calls the API makes on ``audit.store.AuditStore``, with store errors mapped to problems.

Kept in one place so the API's view of the store is one short list. A store that cannot answer
(unreachable server, a ClickHouse error) or a writer's spool that is full or busy is a 503 with
Retry-After; a body over a limit is a 413; a value the store refuses (a stale cursor, a bad
limit) is a 400 with the store's own message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from clickhouse_connect.driver.exceptions import ClickHouseError

from audit.api.problems import Problem
from audit.errors import LimitError, UserError
from audit.records import DecisionRecord
from audit.store.connection import StoreError
from audit.store.filters import DecisionFilter
from audit.store.quarantine import quarantine_row
from audit.store.spool import SpoolBusyError, SpoolFullError

T = TypeVar("T")


# Failures of the store itself (as opposed to values it refuses).
STORE_ERRORS = (StoreError, ClickHouseError)
# Conditions of this server that pass (a full or busy spool): the caller retries the same request.
TEMPORARY_ERRORS = (SpoolFullError, SpoolBusyError)


def unavailable(exc: Exception) -> Problem:
    return Problem("unavailable", f"the store cannot answer: {str(exc).splitlines()[0][:300]}")


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except Problem:
        raise
    except (*STORE_ERRORS, *TEMPORARY_ERRORS) as exc:
        raise unavailable(exc) from None
    except LimitError as exc:
        raise Problem("payload-too-large", str(exc)) from None
    except (UserError, ValueError) as exc:
        raise Problem("invalid-parameter", str(exc)) from None


def decision_filter(**values: Any) -> DecisionFilter:
    """A store ``DecisionFilter`` from the given (already validated) values; None means unset."""
    known = {f.name for f in dataclasses.fields(DecisionFilter)}
    unsupported = sorted(k for k, v in values.items() if v is not None and k not in known)
    if unsupported:
        raise Problem("invalid-parameter", f"{unsupported[0]}: filter not supported by this store")
    found = DecisionFilter(**{k: v for k, v in values.items() if v is not None})
    call(found.time_range_ms)  # a time the store cannot keep, or a window that ends before it starts: 400
    return found


def ready(store: Any) -> None:
    """Raises unless the store answers a query."""
    store.quarantine_count()


def counters(store: Any) -> dict[str, float]:
    """Writer counters (received, written, quarantined, spooled, ...) and replay mismatches."""
    out: dict[str, float] = {f"writer_{k}": v for k, v in store.ingest_stats().items()}
    summary = store.replay_summary()
    out["replay_decisions"] = sum(r["decisions"] for r in summary)
    out["replay_mismatches"] = sum(r["mismatches"] for r in summary)
    lookups = getattr(store, "id_lookups", None)  # decisions asked for by id, and the queries that read them
    if lookups is not None:
        out["id_lookups"], out["id_lookup_queries"] = lookups.lookups, lookups.queries
    index = getattr(store, "id_index", None)  # reads by id answered by the index file, and its state
    if index is not None:
        out.update({"id_index_hits": index.hits, "id_index_misses": index.misses, "id_index_skipped": index.skipped,
                    "id_index_errors": index.errors, "id_index_backfilled": float(index.after is None)})
    keeper = getattr(store, "checkpoints", None)  # world checkpoints the server writes itself (serve --checkpoint-every)
    if keeper is not None:
        out["checkpoints_written"], out["checkpoint_errors"] = keeper.written, keeper.errors
    return out


class OtlpSink:
    """What the OTLP receiver writes to: records through a spooled writer, bad payloads to quarantine."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._writer = store.writer(name="otlp")
        # Batches the receiver spooled but had not delivered when the process last stopped go into
        # the store before any request is judged: the append-only check below looks in the store,
        # so a re-send (or a changed version) of a spooled decision would otherwise pass as new.
        self._recovered = self._writer.drain()

    def write_records(self, records: list[DecisionRecord]) -> list[str]:
        """Write what history does not hold yet; the errors of the records refused as conflicts
        (quarantined here), which the receiver reports to the sender as rejected items."""
        if not self._recovered:
            self._recovered = self._writer.drain()
            if not self._recovered:  # the receiver answers 503 and the sender retries
                raise StoreError(f"batches spooled before the last stop are not delivered yet: {self._writer.last_error}")
        # the same append-only check as the ingest endpoints: a re-sent span never rewrites a decision
        screened, _ = self._store.append_history(self._writer, "otlp", list(records), [])
        self._writer.flush()
        return [str(error["error"]) for error in screened.conflict_errors]

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        self._writer.write_quarantine([quarantine_row(source, kind, error, "", raw)])
        self._writer.flush()

