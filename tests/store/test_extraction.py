"""The engine's extraction of columns and tier rows from record JSON equals the Python one.

Records reach the store as JSON lines and views extract the columns (schema.DECISIONS_IN_MV);
``rows.decision_batch`` computes the same columns in Python. They must agree value for value,
including times written with offsets and fractions, so filters and rollups see what records say.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from audit.records import TierSummary
from audit.store import rows
from audit.store.queries import AuditStore
from tests.store.conftest import write_all
from tests.store.factory import make_record

TIMES = st.builds(
    lambda dt, frac, zone: dt.strftime("%Y-%m-%dT%H:%M:%S") + frac + zone,
    st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(2200, 1, 1)),
    st.sampled_from(["", ".5", ".123", ".999", ".000001", ".123456"]),
    st.sampled_from(["Z", "+05:30", "-08:00", "+00:00"]),  # the offset is required (rows.check_record)
)
TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


def columns_in_store(store: AuditStore) -> tuple[dict, dict]:
    names = ", ".join(c if c != "time" else "toUnixTimestamp64Milli(time) AS time" for c in rows.DECISION_COLUMNS)
    d = store.client.query(f"SELECT {names} FROM decisions ORDER BY decision_id", column_oriented=True).result_columns
    tier_names = ", ".join(c if c != "time" else "toUnixTimestamp64Milli(time) AS time" for c in rows.TIER_COLUMNS)
    t = store.client.query(f"SELECT {tier_names} FROM decision_tiers ORDER BY decision_id, tier",
                           column_oriented=True).result_columns
    return ({c: list(v) for c, v in zip(rows.DECISION_COLUMNS, d or [[]] * len(rows.DECISION_COLUMNS), strict=True)},
            {c: list(v) for c, v in zip(rows.TIER_COLUMNS, t or [[]] * len(rows.TIER_COLUMNS), strict=True)})


@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no slow shrinking
@given(times=st.lists(TIMES, min_size=1, max_size=25), texts=st.lists(TEXT, min_size=4, max_size=4),
       tiers=st.integers(0, 3))
def test_engine_extraction_matches_python_columns(tmp_path_factory, times: list[str], texts: list[str],
                                                  tiers: int) -> None:
    records = []
    for i, time in enumerate(times):
        r = make_record(i, tenant=texts[0], pod=texts[1] + str(i), namespace=texts[2])
        r.time, r.node, r.tiers = time, texts[3], [
            TierSummary(index=k, request=f"r{k}", model=texts[k % 4], considered=k * 3,
                        reasons={texts[0] or "x": k, "in_use": 7}, nodes_evaluated=k) for k in range(tiers)]
        records.append(r.seal())
    records.sort(key=lambda r: r.decision_id)
    expected = rows.decision_batch(records)
    with AuditStore.open(f"chdb://{tmp_path_factory.mktemp('x')}/db") as store:
        write_all(store, records)
        decisions, tier_rows = columns_in_store(store)
    assert decisions == {k: list(v) for k, v in expected.decisions.items()}
    expected_tiers = sorted(zip(*expected.tiers.values(), strict=True), key=lambda t: (t[2], t[3]))
    assert [tuple(t) for t in zip(*tier_rows.values(), strict=True)] == expected_tiers


def test_time_in_the_engine_is_the_utc_instant_of_the_record_time(store: AuditStore) -> None:
    record = make_record(0)
    record.time = "2026-11-01T10:30:00.999999+05:30"
    write_all(store, [record.seal()])
    (stored,) = store.client.query("SELECT toUnixTimestamp64Milli(time) FROM decisions").result_rows[0]
    assert stored == int(datetime(2026, 11, 1, 5, 0, 0, 999000, tzinfo=UTC).timestamp() * 1000) == rows.epoch_ms(
        record.time)
