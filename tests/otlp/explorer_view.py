"""A recorded decision trace as an explorer shows it, for the suite and for docs/otlp.md.

Arize Phoenix (an OTLP trace server with a UI, where decision traces are meant to be read) needs
some fifty packages beside ClaimTrail's, so the suite does not install it; instead it keeps the
OTLP JSON of a few simulated decisions (``tests/fixtures/otlp/decision-traces.json``), checks that recording
against what an SRE must see in an explorer, checks that today's exporter still writes exactly
that recording, and draws it as a text waterfall (``waterfall``), the picture in docs/otlp.md.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.telemetry import TelemetrySettings, otlpwire
from audit.telemetry import schema as s
from audit.telemetry.shape import AttemptLinks, decision_shape
from ingest.otlp.decode import attributes
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "otlp" / "decision-traces.json"
SCENARIO = REPO / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"
# `claimtrail simulate --seed 9 --hours 1 --start 2026-12-01T09:00:00Z`, API on localhost
START = "2026-12-01T09:00:00Z"
API = "http://127.0.0.1:8000"
# a retry after a lost node (attempt 2 links to attempt 1), and an H100 -> A100 fallback
PODS = ("job-000018", "job-000102")
_IDS = ("traceId", "spanId", "parentSpanId")


def recorded_request() -> ExportTraceServiceRequest:
    """The traces as an ``ExportTraceServiceRequest``, written today from the same simulation."""
    text = SCENARIO.read_text()
    scenario = load_scenario_text(text, SCENARIO.name)
    scenario.start = START
    result = simulate(scenario, seed=9, hours=1.0)
    options = TelemetrySettings(verdicts="both", api_url=API).shape_options()
    links = AttemptLinks()
    spans: list[bytes] = []
    for record in result.records:  # every decision in order, so attempts link as they would in a run
        shape = decision_shape(record, (), None, options, links)
        if record.pod in PODS:
            spans += otlpwire.decision(shape, logs=False)[0]
    envelope = otlpwire.Envelope({"service.name": "claimtrail"})
    return ExportTraceServiceRequest.FromString(envelope.request(spans))


def to_otlp_json(request: ExportTraceServiceRequest) -> str:
    """OTLP JSON: protobuf JSON with trace and span ids in hex rather than base64."""
    def hexify(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: base64.b64decode(v).hex() if k in _IDS else hexify(v) for k, v in node.items()}
        if isinstance(node, list):
            return [hexify(x) for x in node]
        return node

    return json.dumps(hexify(json_format.MessageToDict(request)), indent=1, sort_keys=True) + "\n"


def from_otlp_json(text: str) -> ExportTraceServiceRequest:
    def unhex(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in _IDS else unhex(v) for k, v in node.items()}
        if isinstance(node, list):
            return [unhex(x) for x in node]
        return node

    return json_format.ParseDict(unhex(json.loads(text)), ExportTraceServiceRequest())


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans]


def waterfall(spans: list[Span], width: int = 40) -> str:
    """One trace drawn as explorers draw it: spans as bars on the trace's time axis, children
    under their parent in start order (siblings with the same start keep their order)."""
    root = next(sp for sp in spans if not sp.parent_span_id)
    children = sorted((sp for sp in spans if sp.parent_span_id), key=lambda sp: sp.start_time_unix_nano)
    begin, end = root.start_time_unix_nano, root.end_time_unix_nano
    scale = width / max(end - begin, 1)

    def bar(sp: Span) -> str:
        left = int((sp.start_time_unix_nano - begin) * scale)
        length = max(1, round((sp.end_time_unix_nano - sp.start_time_unix_nano) * scale))
        mark = "!" if sp.status.code == 2 else "#"
        return (" " * left + mark * length)[:width].ljust(width)

    def row(prefix: str, sp: Span) -> str:
        a = attributes(sp.attributes)
        took = (sp.end_time_unix_nano - sp.start_time_unix_nano) / 1e6
        note = a.get(s.TIER_RESULT) or a.get(s.OUTCOME) or ""
        if sp.status.message:
            note += f" - {sp.status.message}"
        if sp.events:
            note += f" ({len(sp.events)} verdict events)"
        return f"{prefix + sp.name:<37}|{bar(sp)}| {took:>9.3f} ms  {note}".rstrip()

    a = attributes(root.attributes)
    head = [f"{a[s.K8S_NAMESPACE]}/{a[s.K8S_POD_NAME]} attempt {a[s.ATTEMPT]}, trace {root.trace_id.hex()}"]
    for link in root.links:
        head.append(f"  linked: attempt {attributes(link.attributes)[s.LINK_ATTEMPT]}, trace {link.trace_id.hex()}")
    lines = [row("", root)]
    for i, sp in enumerate(children):
        lines.append(row("└─ " if i == len(children) - 1 else "├─ ", sp))
    return "\n".join(head + lines)


def traces(request: ExportTraceServiceRequest) -> dict[bytes, list[Span]]:
    by_trace: dict[bytes, list[Span]] = {}
    for sp in spans_of(request):
        by_trace.setdefault(sp.trace_id, []).append(sp)
    return by_trace


if __name__ == "__main__":  # rewrite the recording after a deliberate change of the trace layout
    RECORDING.write_text(to_otlp_json(recorded_request()))
    for spans in traces(from_otlp_json(RECORDING.read_text())).values():
        print(waterfall(spans), end="\n\n")
