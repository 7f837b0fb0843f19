"""Properties of pod-name hashing: the name is gone from the wire, and the record stays valid."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from audit.telemetry import Redaction
from ingest.otlp.decode import records_from_traces
from tests.otlp.payloads import exported
from tests.telemetry.records_factory import make_record

# Kubernetes pod names: DNS-1123 labels, often a workload name plus a generated suffix
pod_names = st.from_regex(r"[a-z][a-z0-9-]{4,30}[a-z0-9]", fullmatch=True)
SENTINEL = "zz-sentinel-pod-zz"


def _wire(pod: str, redaction: Redaction) -> bytes:
    record = make_record(pod=pod, claims=[f"team-vision/{pod}-gpu-x7k2"], message=f"pod team-vision/{pod} waited")
    spans, logs = exported([record], redaction)
    return spans.SerializeToString() + logs.SerializeToString()


@settings(max_examples=30, deadline=None)
@given(pod_names)
def test_hashed_pod_name_is_in_no_byte_of_the_export(pod: str) -> None:
    # a name that is also part of the fixed vocabulary (say "vision") cannot be told apart
    assume(pod.encode() not in _wire(SENTINEL, Redaction()))
    assert pod.encode() in _wire(pod, Redaction())
    assert pod.encode() not in _wire(pod, Redaction(hash_pod_names=True))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["a", "in", "use", "allocated", "dra", "0", "selected"]))
def test_pod_names_that_occur_in_vocabulary_do_not_corrupt_the_record(pod: str) -> None:
    record = make_record(pod=pod)
    spans, _ = exported([record], Redaction(hash_pod_names=True))
    decoded = records_from_traces(spans)
    assert decoded.rejected == []
    (received,) = decoded.records
    assert received.pod == Redaction().pod_token(pod)
    assert (received.outcome, received.track, received.output_digest) == (record.outcome, record.track, record.output_digest)
    assert [t.reasons for t in received.tiers] == [t.reasons for t in record.tiers]
    assert [e.reason for t in received.tiers for e in t.exemplars] == [e.reason for t in record.tiers for e in t.exemplars]
