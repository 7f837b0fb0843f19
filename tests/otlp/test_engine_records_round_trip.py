"""Records made by the real engine (through the seeded simulator) survive OTLP export and receipt."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.otlp.decode import records_from_logs, records_from_traces
from tests.otlp.payloads import exported

REPO = Path(__file__).resolve().parents[2]
loop = pytest.importorskip("ingest.simulate.loop", reason="the simulator is not in this tree yet")
scenario = pytest.importorskip("ingest.simulate.scenario")


@pytest.mark.parametrize(
    "path",
    ["ingest/simulate/scenarios/cluster-day.yaml", "tests/fixtures/scenarios/fairness.yaml"],
    ids=["cluster-day", "fairness"],
)
def test_engine_records_round_trip_with_identical_digests(path: str) -> None:
    sc = scenario.load_scenario_text((REPO / path).read_text(), path)
    records = loop.simulate(sc, seed=3, hours=0.5).records
    assert records, "the scenario slice produced no decisions"
    spans, logs = exported(records)
    decoded = records_from_traces(spans)
    assert decoded.rejected == [] and decoded.ignored == 0
    assert [r.output_digest for r in decoded.records] == [r.output_digest for r in records]
    assert [r.to_dict() for r in decoded.records] == [r.to_dict() for r in records]
    assert decoded.parts == sum(len(r.tiers) + (1 if r.wait_ms else 0) for r in records)  # tier and wait spans
    exemplars = sum(min(64, sum(len(t.exemplars) for t in r.tiers)) for r in records)
    assert records_from_logs(logs).parts == exemplars
