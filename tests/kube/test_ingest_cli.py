"""``claimtrail ingest kube``: user mistakes are one line naming the option, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli.main import main
from audit.dra.validate.names import DNS_SUBDOMAIN
from ingest.kube.lease import default_lease_name

BAD = {
    "missing_kubeconfig": (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: cannot load"),
    "unknown_context": (["--kubeconfig", "@kubeconfig", "--context", "nope"], "cannot load Kubernetes access"),
    "negative_seq": (["--kubeconfig", "@kubeconfig", "--seq-start", "-1", "--no-leader-election"], "--seq-start: must be >= 0"),
    "cluster_with_a_newline": (["--kubeconfig", "@kubeconfig", "--cluster", "prod\neu"],
                               "--cluster: 'prod\\neu': control characters are not allowed in a cluster name"),
    "lease_name_not_a_name": (["--kubeconfig", "@kubeconfig", "--lease-name", "Watcher_1"],
                              "--lease-name 'Watcher_1': a Lease's name must be a lowercase RFC 1123 subdomain"),
}


@pytest.mark.parametrize(("extra", "message"), list(BAD.values()), ids=list(BAD))
def test_bad_ingest_options_are_reported_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str | None
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "clusters: [{name: lab, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: lab}}]\nusers: [{name: lab, user: {}}]\n"
    )
    argv = ["ingest", "kube", "--server", "http://127.0.0.1:9"] + [str(kubeconfig) if a == "@kubeconfig" else a for a in extra]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("claimtrail ingest: ")
    if message:
        assert message in err


@pytest.mark.parametrize(("cluster", "lease"), [
    ("prod", "claimtrail-watcher-prod"),
    ("lab.eu-1", "claimtrail-watcher-lab.eu-1"),
    # a kubeconfig context as EKS and GKE name them, and a cluster name with a space
    ("arn:aws:eks:us-east-1:123456789012:cluster/prod", "claimtrail-watcher-arn-aws-eks-us-east-1-123456789012-cluster-"
                                                        "prod-" + "@"),
    ("gke_my-project_europe-west4_prod", "claimtrail-watcher-gke-my-project-europe-west4-prod-@"),
    ("Prod EU", "claimtrail-watcher-prod-eu-@"),
    ("🙂", "claimtrail-watcher-@"),
], ids=["plain", "subdomain", "eks-arn", "gke-context", "space-and-capitals", "no-letter-left"])
def test_the_default_lease_name_is_a_valid_name_of_the_cluster(cluster: str, lease: str) -> None:
    import hashlib

    expected = lease.replace("@", hashlib.sha256(cluster.encode()).hexdigest()[:12])
    assert default_lease_name(cluster) == expected
    assert DNS_SUBDOMAIN.fullmatch(expected) and len(expected) <= 253


def test_a_long_cluster_name_gives_a_lease_name_within_the_limit() -> None:
    names = {default_lease_name("c" * 300 + str(i)) for i in range(3)}
    assert len(names) == 3  # the digest keeps them apart where the cut would not
    assert all(DNS_SUBDOMAIN.fullmatch(n) and len(n) == 253 for n in names)


KUBECONFIG_TWO_CONTEXTS = (
    "apiVersion: v1\nkind: Config\ncurrent-context: lab-eu\n"
    "clusters: [{name: lab, cluster: {server: 'http://127.0.0.1:9'}}]\n"
    "contexts: [{name: lab-eu, context: {cluster: lab, user: lab}}, {name: lab-us, context: {cluster: lab, user: lab}}]\n"
    "users: [{name: lab, user: {}}]\n"
)

CLUSTER_NAMES = {
    # two clusters watched from one kubeconfig must not share one event log under one name
    "current_context": ([], "lab-eu"),
    "context_flag": (["--context", "lab-us"], "lab-us"),
    "cluster_flag": (["--cluster", "prod"], "prod"),
    "cluster_flag_wins": (["--context", "lab-us", "--cluster", "prod"], "prod"),
}


@pytest.mark.parametrize(("extra", "cluster"), list(CLUSTER_NAMES.values()), ids=list(CLUSTER_NAMES))
def test_the_cluster_is_named_after_the_kubeconfig_context_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], cluster: str
) -> None:
    import ingest.kube.watcher

    seen: list[str] = []

    class NamedOnly:
        def __init__(self, api: object, name: str, sink: object, **kw: object) -> None:
            seen.append(name)

        def resume(self, stored: object) -> int:
            return 0

        def run(self, stop: object) -> None:
            pass

    monkeypatch.setattr(ingest.kube.watcher, "Watcher", NamedOnly)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG_TWO_CONTEXTS)
    argv = ["ingest", "kube", "--server", str(tmp_path / "out.jsonl"), "--kubeconfig", str(kubeconfig),
            "--no-leader-election", "--seq-start", "0", *extra]
    assert main(argv) == 0
    assert seen == [cluster]
