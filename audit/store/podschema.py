"""The pod lifecycle's tables: one row per pod incarnation, and the series the metrics integrate over.

``pods`` holds what ``audit.metrics.lifecycle.PodLife`` holds, one row per pod incarnation of a
cluster, keyed by its row in the cluster's fold (``row``: rows are only ever appended, so a row
number names one incarnation for good). A pod's row is rewritten whenever the fold changes it
(bound, allocated, released, judged regretted…); each write carries the fold's event ``seq`` as
``version``, so ReplacingMergeTree keeps the latest and reads take it with ``FINAL``. Times are
integer milliseconds since the epoch (NULL: not happened yet), so every sum over them is exact.
A pod's ``h100_eq`` is the Σ of its devices' H100-equivalents (each device weighed by its own
model, policy at allocation); ``models`` lists the models it got, ``tiers`` the subrequest index
each request got (pod claim order, request order).

``pod_policies`` (weights, starvation timeout and regret window of each policy in force, from
``from_ms``), ``pod_capacity`` (the cluster's capacity in H100-equivalents from ``from_ms``) and
``unhealthy_spans`` (each device's unhealthy intervals; ``end_ms`` NULL while still unhealthy)
are the window-level series entitlement, Jain's index and device health integrate over.
``pod_folds`` says up to which event ``seq`` the tables are written, so a server starting on a
store can take the lifecycle from them instead of folding the whole log again
(``audit.store.podload``). Every table is sharded by cluster, so a cluster's rows and series sit
on one shard.
"""

from __future__ import annotations

from audit.store.schema import Table

PODS = Table(
    name="pods",
    columns=(
        "cluster LowCardinality(String)",
        "row UInt32",  # the pod's row in the cluster's fold: one incarnation
        "version UInt64",  # the fold's event seq when the row was written: the latest wins
        "namespace LowCardinality(String)",
        "pod String",
        "uid String",
        "tenant LowCardinality(String)",
        "track LowCardinality(String)",
        "created_ms Int64",
        "bound_ms Nullable(Int64)",
        "failed_ms Nullable(Int64)",
        "allocated_ms Nullable(Int64)",
        "released_ms Nullable(Int64)",
        "alternatives Bool",
        "tiers Array(UInt16)",
        "first_choice Bool",
        "fallback Bool",
        "preferred LowCardinality(String)",
        "allocated LowCardinality(String)",  # models got, '|'-joined
        "models Array(LowCardinality(String))",
        "devices UInt32",
        "h100_eq Float64",
        "regretted Bool",
        "asked LowCardinality(String)",  # device-plugin pods: the models their node constraints admitted
    ),
    engine="ReplacingMergeTree",
    engine_args="version",
    order_by="(cluster, row)",
    shard_key="cityHash64(cluster)",
)

POD_POLICIES = Table(
    name="pod_policies",
    columns=(
        "cluster LowCardinality(String)",
        "idx UInt32",  # position in the cluster's policy timeline
        "version UInt64",
        "from_ms Int64",
        "policy_name String",
        "policy_version String",
        "tenants Array(String)",  # the tenants it names; any other tenant weighs 1
        "weights Array(Float64)",
        "starvation_ms Int64",
        "regret_window_ms Int64",
    ),
    engine="ReplacingMergeTree",
    engine_args="version",
    order_by="(cluster, idx)",
    shard_key="cityHash64(cluster)",
)

POD_CAPACITY = Table(
    name="pod_capacity",
    columns=("cluster LowCardinality(String)", "idx UInt32", "version UInt64", "from_ms Int64", "h100_eq Float64"),
    engine="ReplacingMergeTree",
    engine_args="version",
    order_by="(cluster, idx)",
    shard_key="cityHash64(cluster)",
)

UNHEALTHY_SPANS = Table(
    name="unhealthy_spans",
    columns=("cluster LowCardinality(String)", "device String", "start_ms Int64", "version UInt64",
             "model LowCardinality(String)", "end_ms Nullable(Int64)"),
    engine="ReplacingMergeTree",
    engine_args="version",
    order_by="(cluster, device, start_ms)",
    shard_key="cityHash64(cluster)",
)

POD_TABLES = {t.name: t for t in (PODS, POD_POLICIES, POD_CAPACITY, UNHEALTHY_SPANS)}

# Added by a later migration than the tables above (which an older store already has): how far
# the tables are written. ``seq`` is the last event the fold had taken when it last wrote them
# (every row and series entry changed up to it is in), ``end_ms`` that event's time; the row is
# written after the rows it vouches for, so a write cut short leaves it at the previous round.
POD_FOLDS = Table(
    name="pod_folds",
    columns=("cluster LowCardinality(String)", "version UInt64", "seq Int64", "end_ms Int64", "pods UInt32"),
    engine="ReplacingMergeTree",
    engine_args="version",
    order_by="(cluster)",
    shard_key="cityHash64(cluster)",
)
POD_ADDED_COLUMNS = ("asked LowCardinality(String) DEFAULT ''",)
