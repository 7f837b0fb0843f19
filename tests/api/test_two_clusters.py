"""One store, two clusters holding pods of the same names.

A pod is named uniquely within its cluster only: ``why`` for a pod whose namespace and name have
decisions in two clusters asks which one, instead of explaining the newer pod unasked. Pod figures
are per cluster: without one named, the overview's pod counts are unknown, not zero, on the API
and on the dashboard alike."""

from __future__ import annotations

import dataclasses
import json

import pytest

from audit.cli.main import main
from audit.records import decision_id
from tests.api import factory
from tests.api.conftest import Server, own_server, world_events

SECOND = "lab (eu)"
server = own_server("why-cluster")


@pytest.fixture(scope="module")
def two_clusters(server: Server) -> Server:
    """The factory's cluster stored twice: as ``lab``, and as ``lab (eu)`` an hour later."""
    for cluster, hours in ((factory.CLUSTER, 0), (SECOND, 1)):
        events = [dataclasses.replace(e, cluster=cluster) for e in world_events()]
        records = []
        for r in factory.RECORDS:
            moved = dataclasses.replace(r, cluster=cluster, decision_id=decision_id(cluster, r.claim_uids[0], r.attempt),
                                        time=r.time.replace(f"T{r.time[11:13]}", f"T{int(r.time[11:13]) + hours:02d}"),
                                        output_digest="")
            records.append(moved.seal())
        for kind, items in (("events", [e.to_dict() for e in events]), ("records", [r.to_dict() for r in records])):
            answer = server.post(f"/v1/ingest/{kind}", content="".join(json.dumps(i) + "\n" for i in items).encode())
            assert answer.status_code == 200 and answer.json()["quarantined"] == 0, answer.text
    return server


def test_a_pod_name_in_two_clusters_needs_its_cluster(two_clusters: Server) -> None:
    answer = two_clusters.get("/v1/pods/team-a/train-1/why", model="H100")
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == ("cluster: required: pod team-a/train-1 has decisions in more than one cluster "
                                       f"(lab, {SECOND})")


@pytest.mark.parametrize("cluster", [factory.CLUSTER, SECOND])
def test_the_cluster_given_is_the_pod_explained(two_clusters: Server, cluster: str) -> None:
    answer = two_clusters.get("/v1/pods/team-a/train-1/why", model="H100", cluster=cluster)
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision_id"] == decision_id(cluster, factory.FALLBACK.claim_uids[0], factory.FALLBACK.attempt)


def test_a_cluster_without_the_pod_is_named_in_the_404(two_clusters: Server) -> None:
    answer = two_clusters.get("/v1/pods/team-a/train-1/why", model="H100", cluster="elsewhere")
    assert (answer.status_code, answer.json()["detail"]) == (404, "no decision for pod team-a/train-1 in cluster elsewhere")


def test_the_why_command_passes_its_cluster(two_clusters: Server, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["why", "team-a/train-1", "--model", "H100", "--server", two_clusters.base, "--token", "admin-secret", "-o",
            "json"]
    assert main(argv) == 2
    assert "cluster: required: pod team-a/train-1 has decisions in more than one cluster" in capsys.readouterr().err
    assert main([*argv, "--cluster", SECOND]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["decision_id"] == decision_id(SECOND, factory.FALLBACK.claim_uids[0], factory.FALLBACK.attempt)


def test_the_overview_without_a_cluster_has_no_pod_counts_and_says_why(two_clusters: Server) -> None:
    body = two_clusters.get("/v1/stats/overview").json()
    assert body["pod_figures"] == f"none: pass cluster= (the store holds several clusters: lab, {SECOND})"
    assert {(r["pending_now"], r["starving_pods"]) for r in body["rows"]} == {(None, None)}
    one = two_clusters.get("/v1/stats/overview", cluster=SECOND).json()
    assert "pod_figures" not in one
    fairness = two_clusters.get("/v1/stats/fairness", cluster=SECOND).json()["tenants"]
    pods = {t["tenant"]: (t["pending_at_end"], t["starving_pods"]) for t in fairness}
    assert {r["tenant"]: (r["pending_now"], r["starving_pods"]) for r in one["rows"]} == {
        r["tenant"]: pods.get(r["tenant"], (0, 0)) for r in one["rows"]}
    assert any(r["pending_now"] for r in one["rows"])  # the world's pending pod, counted


@pytest.mark.parametrize(("kind", "unknown"), [
    ("fairness", {"jain_whole": None, "jain_contention": None, "contention_windows": None, "tenants": []}),
    ("fallback", {"pods_with_preference": None, "fallbacks": None, "regretted": None, "first_choice_rate": None}),
    ("health", {"unhealthy_devices": None, "unhealthy_device_hours": None}),
])
def test_pod_figures_without_a_cluster_are_unknown_not_zero(two_clusters: Server, kind: str, unknown: dict) -> None:
    body = two_clusters.get(f"/v1/stats/{kind}").json()
    assert {k: body[k] for k in unknown} == unknown
    assert body["pod_figures"] == f"none: pass cluster= (the store holds several clusters: lab, {SECOND})"


@pytest.mark.parametrize(("page", "metrics"), [
    ("1_overview.py", {"Pending at window end": "–", "First-choice rate": "–", "Fallbacks (pods)": "–"}),
    ("2_fallback.py", {"Fallbacks (pods)": "–", "Regretted": "–", "Regret rate": "–"}),
    ("4_health.py", {"Unhealthy devices": "–", "Unhealthy device-hours": "–"}),
])
def test_the_pages_show_unknown_pod_figures_as_unknown(two_clusters: Server, monkeypatch: pytest.MonkeyPatch, page: str,
                                                      metrics: dict[str, str]) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.api.conftest import REPO, TOKENS

    monkeypatch.setenv("CLAIMTRAIL_API", two_clusters.base)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", TOKENS["admin"])
    at = AppTest.from_file(str(REPO / "dashboards" / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(f"panels/{page}").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = {m.label: m.value for m in at.metric}
    assert {k: shown[k] for k in metrics} == metrics
    assert [i.value for i in at.info][:1] == [
        f"No pod figures: none: pass cluster= (the store holds several clusters: lab, {SECOND})"]
