"""The recorded decision traces show an SRE what docs/otlp.md promises, and today's exporter still
writes exactly that recording (see ``tests/otlp/explorer_view.py`` for why it is a recording)."""

from __future__ import annotations

import re

from audit.telemetry import schema as s
from ingest.otlp.decode import attributes
from tests.otlp.explorer_view import (
    API,
    RECORDING,
    REPO,
    from_otlp_json,
    recorded_request,
    spans_of,
    to_otlp_json,
    traces,
    waterfall,
)

RECORDED = from_otlp_json(RECORDING.read_text())


def _trace(pod: str, attempt: int) -> dict[str, object]:
    for spans in traces(RECORDED).values():
        root = next(sp for sp in spans if not sp.parent_span_id)
        a = attributes(root.attributes)
        if (a[s.K8S_POD_NAME], a[s.ATTEMPT]) == (pod, attempt):
            return {sp.name: sp for sp in spans}
    raise AssertionError(f"no recorded trace of {pod} attempt {attempt}")


def test_todays_exporter_writes_the_recording() -> None:
    assert to_otlp_json(recorded_request()) == RECORDING.read_text()


def test_tier_spans_are_named_by_model_in_preference_order_with_their_result() -> None:
    spans = _trace("job-000102", 1)
    tiers = sorted((sp for name, sp in spans.items() if name.startswith(s.TIER_SPAN)),
                   key=lambda sp: sp.start_time_unix_nano)  # type: ignore[union-attr]
    assert [(sp.name, attributes(sp.attributes)[s.TIER_RESULT]) for sp in tiers] == [  # type: ignore[union-attr]
        ("dra.allocate.tier H100", "exhausted"),
        ("dra.allocate.tier A100", "selected"),
        ("dra.allocate.tier A100|H100|L40S", "not_tried"),
    ]
    h100 = spans["dra.allocate.tier H100"]
    assert (h100.status.code, h100.status.message) == (2, "H100 exhausted: in_use 118; blocked: insufficient_on_node")  # type: ignore[union-attr]
    assert attributes(h100.attributes)["claimtrail.tier.blocker.insufficient_on_node.nodes_with_capacity"] == 0  # type: ignore[union-attr]
    assert [attributes(e.attributes)[s.VERDICT_REASON] for e in spans["dra.allocate.tier A100"].events] == ["selected"]  # type: ignore[union-attr]


def test_a_retry_shows_its_wait_and_links_to_the_attempt_before() -> None:
    first, second = _trace("job-000018", 1), _trace("job-000018", 2)
    root, wait = second[s.ROOT_SPAN], second[s.WAIT_SPAN]
    assert (wait.start_time_unix_nano, wait.end_time_unix_nano - wait.start_time_unix_nano) == (  # type: ignore[union-attr]
        root.start_time_unix_nano, 2_000_000_000)  # type: ignore[union-attr]
    (link,) = root.links  # type: ignore[union-attr]
    assert (link.trace_id, link.span_id) == (first[s.ROOT_SPAN].trace_id, first[s.ROOT_SPAN].span_id)  # type: ignore[union-attr]
    assert first[s.ROOT_SPAN].status.message == ("bind-time re-check failed (node_lost); bind failure 1 of 6; "
                                                 "retrying in 2000 ms")  # type: ignore[union-attr]


def test_every_root_links_to_its_why_answer_and_the_window_starts_where_asked() -> None:
    roots = [sp for sp in spans_of(RECORDED) if not sp.parent_span_id]
    assert len(roots) == 3
    for root in roots:
        a = attributes(root.attributes)
        assert a[s.WHY_URL] == f"{API}/v1/decisions/{a[s.DECISION_ID]}/why?model=H100"
    first = min(sp.start_time_unix_nano for sp in roots)
    assert first >= 1_764_579_600_000_000_000  # 2026-12-01T09:00:00Z, the --start of the recording


def test_the_picture_in_the_docs_is_the_recording() -> None:
    doc = (REPO / "docs" / "otlp.md").read_text()
    block = re.search(r"<!-- waterfall -->\n```\n(.*?)```", doc, re.S)
    assert block is not None
    assert block.group(1) == "\n\n".join(waterfall(spans) for spans in traces(RECORDED).values()) + "\n"
