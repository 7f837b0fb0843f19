"""What readers of the store may ask of it, by resource, as typed interfaces.

The API and the replay service depend on these protocols, not on ``AuditStore`` itself, so what
they read is one short, typed list per resource: decisions, aggregates over them, the world's
event history, and replay runs. ``AuditStore`` satisfies all of them; a reader names the narrowest
one it needs. Every method either answers or raises ``StoreError``/``ClickHouseError`` (the store
cannot answer) or ``UserError`` (a value it refuses), which the API maps to problems in one place
(``audit.api.storeport.call``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from audit.events import WorldEvent
from audit.metrics.lifecycle import Lifecycle
from audit.records import DecisionRecord
from audit.store.filters import DecisionFilter

T = TypeVar("T")


@dataclass(frozen=True)
class PodDecision:
    """What a resuming producer needs of a stored decision about a pod it still sees."""

    decision_id: str
    namespace: str
    pod_uid: str
    attempt: int
    outcome: str


class DecisionReads(Protocol):
    """Decision records by id, by pod, and as pages of a filtered listing (newest first)."""

    def get_decision(self, decision_id: str, tenant: str | None) -> DecisionRecord | None: ...

    def get_decision_text(self, decision_id: str, tenant: str | None) -> str | None: ...

    def indexed_decision_text(self, decision_id: str, tenant: str | None) -> tuple[bool, str | None]: ...

    def engine_decision_text(self, decision_id: str, tenant: str | None) -> str | None: ...

    def get_decisions(self, decision_ids: Sequence[str], tenant: str | None) -> dict[str, DecisionRecord]: ...

    def pod_clusters(self, namespace: str, pod: str, tenant: str | None, limit: int = ...) -> list[str]: ...

    def latest_for_pod(self, namespace: str, pod: str, tenant: str | None,
                       cluster: str | None = None) -> DecisionRecord | None: ...

    def known_decision_ids(self, decision_ids: Sequence[str], tenant: str | None) -> set[str]: ...

    def pod_decisions(self, cluster: str, pod_uids: Sequence[str]) -> list[PodDecision]: ...

    def decision_keys(self, f: DecisionFilter, limit: int) -> list[tuple[str, str, str, int]]: ...

    def list_decisions(self, f: DecisionFilter, cursor: str | None,
                       limit: int) -> tuple[list[DecisionRecord], str | None]: ...

    def list_decision_texts(self, f: DecisionFilter, cursor: str | None, limit: int) -> tuple[list[str], str | None]: ...

    def all_decisions(self, f: DecisionFilter, page: int = ...) -> list[DecisionRecord]: ...

    def decisions_version(self) -> Hashable | None: ...


class AggregateReads(Protocol):
    """Decision counts the store answers from its rollups or raw rows (``audit.store.aggregates``),
    and ``insight``, which runs a caller's own query function with the store's locked
    ``query(sql, parameters, settings)``: the home of a stats kind's SQL is the kind's module."""

    def fallback_stats(self, f: DecisionFilter, group_by: Sequence[str],
                       scope_tenant: str | None = None) -> list[dict[str, Any]]: ...

    def health_stats(self, f: DecisionFilter) -> list[dict[str, Any]]: ...

    def migration_stats(self, f: DecisionFilter) -> list[dict[str, Any]]: ...

    def insight(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...


class HistoryReads(Protocol):
    """The world's event log per cluster, its checkpoints and the pod lifecycle folded from it."""

    def event_clusters(self) -> list[str]: ...

    def max_seq(self, cluster: str) -> int | None: ...

    def events(self, cluster: str, after_seq: int, upto_seq: int, page: int = 10_000) -> Iterator[WorldEvent]: ...

    def object_events(self, cluster: str, kind: str, keys: Sequence[str], after_seq: int, upto_seq: int,
                      page: int = 10_000) -> Iterator[WorldEvent]: ...

    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict[str, Any]] | None: ...

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None: ...

    def pod_lifecycle(self, cluster: str) -> Lifecycle: ...


class StoreReads(DecisionReads, AggregateReads, HistoryReads, Protocol):
    """Everything the API reads."""
