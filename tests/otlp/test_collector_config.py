"""deploy/otel-collector.yaml is a coherent collector config that routes decisions by our schema.

No collector binary runs here, so this checks what can be checked offline: every pipeline names
defined components, all traces go to the trace backend, and the decision filter keys on the span
names and attribute keys the exporter actually uses.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.telemetry import schema as s

CONFIG: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "deploy" / "otel-collector.yaml").read_text()
)


@pytest.mark.parametrize("section", ["receivers", "processors", "exporters"])
def test_pipelines_only_name_defined_components(section: str) -> None:
    used = {c for p in CONFIG["service"]["pipelines"].values() for c in p[section]}
    assert used <= set(CONFIG[section])
    assert set(CONFIG[section]) <= used  # nothing defined and forgotten


def test_extensions_in_use_are_defined() -> None:
    assert set(CONFIG["service"]["extensions"]) == set(CONFIG["extensions"])
    assert CONFIG["exporters"]["otlphttp/claimtrail"]["sending_queue"]["storage"] in CONFIG["extensions"]


def test_all_traces_reach_the_trace_backend_unfiltered() -> None:
    pipeline = CONFIG["service"]["pipelines"]["traces/all"]
    assert pipeline["exporters"] == ["otlp/trace-backend"]
    assert not any(p.startswith("filter") for p in pipeline["processors"])


def test_claimtrail_gets_only_filtered_decision_telemetry() -> None:
    pipelines = CONFIG["service"]["pipelines"]
    to_claimtrail = {name: p for name, p in pipelines.items() if "otlphttp/claimtrail" in p["exporters"]}
    assert set(to_claimtrail) == {"traces/claimtrail", "logs/claimtrail"}
    assert all("filter/claimtrail-decisions" in p["processors"] for p in to_claimtrail.values())


def test_decision_filter_uses_the_exported_schema() -> None:
    rules = CONFIG["processors"]["filter/claimtrail-decisions"]
    span_rules = " ".join(rules["traces"]["span"])
    assert f'attributes["{s.DECISION_ID}"] == nil' in span_rules
    assert f'name != "{s.ROOT_SPAN}"' in span_rules and f'name != "{s.WAIT_SPAN}"' in span_rules
    assert 'not IsMatch(name, "^dra[.]allocate[.]tier ")' in span_rules  # "dra.allocate.tier <model>"
    assert re.match(r"^dra[.]allocate[.]tier ", f"{s.TIER_SPAN} H100")
    assert f'attributes["{s.RECORD}"] == nil' in " ".join(rules["logs"]["log_record"])
