"""deploy/ builds offline, every object is a kind the cluster knows, and the install is least
privilege, pinned and resourced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.deploy.kustomize import (
    LISTED_CRDS,
    BuildError,
    build,
    containers,
    is_known,
    is_namespaced,
    model_name,
)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
YAML_FILES = sorted(p for p in DEPLOY.rglob("*.yaml"))
KUSTOMIZATIONS = sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml"))
ENTRY_POINTS = ["overlays/production", "overlays/embedded", "overlays/migration-canary",
                "overlays/migration-expand", "overlays/migration-rollback", "replay"]


def _rel(p: Path) -> str:
    return str(p.relative_to(DEPLOY)) or "."


@pytest.mark.parametrize("path", YAML_FILES, ids=[_rel(p) for p in YAML_FILES])
def test_every_yaml_file_parses(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no document"


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=[_rel(p) for p in KUSTOMIZATIONS])
def test_every_kustomization_builds(directory: Path) -> None:
    assert build(directory)


def test_every_kustomization_is_reachable_from_an_entry_point() -> None:
    reachable: set[Path] = set()

    def walk(d: Path) -> None:
        reachable.add(d.resolve())
        for entry in yaml.safe_load((d / "kustomization.yaml").read_text()).get("resources") or []:
            if (d / entry).is_dir():
                walk((d / entry).resolve())

    for entry in ENTRY_POINTS:
        walk(DEPLOY / entry)
    orphans = {_rel(k) for k in KUSTOMIZATIONS} - {_rel(r) for r in reachable} - {"dra/templates/v1"}
    assert orphans == set()


def test_missing_resource_is_a_build_error(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [nope.yaml]\n")
    with pytest.raises(BuildError, match="resource nope.yaml does not exist"):
        build(tmp_path)


def _all_objects() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for entry in ENTRY_POINTS + ["dra/templates/v1"]:
        out += [(entry, o) for o in build(DEPLOY / entry)]
    return out


OBJECTS = _all_objects()
IDS = [f"{e}:{o['kind']}/{o['metadata']['name']}" for e, o in OBJECTS]


def _keys_lost(original: Any, roundtrip: Any, path: str = "") -> list[str]:
    """Fields of ``original`` that the client model did not keep: misspelled or misplaced."""
    lost: list[str] = []
    if isinstance(original, dict):
        if not isinstance(roundtrip, dict):
            return [path or "."]
        for k, v in original.items():
            if k not in roundtrip:
                lost.append(f"{path}.{k}")
            else:
                lost += _keys_lost(v, roundtrip[k], f"{path}.{k}")
    elif isinstance(original, list) and isinstance(roundtrip, list):
        for i, (a, b) in enumerate(zip(original, roundtrip, strict=False)):
            lost += _keys_lost(a, b, f"{path}[{i}]")
    return lost


@pytest.mark.parametrize(("entry", "obj"), OBJECTS, ids=IDS)
def test_every_object_is_a_known_kind_with_only_known_fields(entry: str, obj: dict[str, Any]) -> None:
    api_version, kind = obj["apiVersion"], obj["kind"]
    assert is_known(api_version, kind), f"{api_version} {kind} is neither served by the client nor a listed CRD"
    if entry in ENTRY_POINTS:  # template libraries get their namespace from the overlay using them
        namespaced = is_namespaced(api_version, kind)
        assert bool(obj["metadata"].get("namespace")) == namespaced, "namespace set exactly on namespaced kinds"
    if (api_version, kind) in LISTED_CRDS:
        return
    api = client.ApiClient()
    model = api.deserialize(json.dumps(obj), model_name(api_version, kind), "application/json")
    assert _keys_lost(obj, api.sanitize_for_serialization(model)) == []


PRODUCTION = build(DEPLOY / "overlays/production")


def _of_kind(*kinds: str) -> list[dict[str, Any]]:
    return [o for o in PRODUCTION if o["kind"] in kinds]


WORKLOADS = [o for _, o in OBJECTS if containers(o)]


@pytest.mark.parametrize("obj", WORKLOADS, ids=[f"{o['kind']}/{o['metadata']['name']}" for o in WORKLOADS])
def test_every_container_has_a_pinned_image_and_resources(obj: dict[str, Any]) -> None:
    for c in containers(obj):
        image = c["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and "/" not in tag and tag != "latest", f"{c['name']}: image {image} is not pinned by tag"
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(res.get(part) or {}), f"{c['name']}: resources.{part} needs cpu and memory"


def test_watcher_cluster_role_only_reads() -> None:
    roles = [o for _, o in OBJECTS if o["kind"] == "ClusterRole"]
    assert roles
    for role in roles:
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, (role["metadata"]["name"], rule)
            assert "*" not in rule.get("resources", []) and "*" not in rule.get("apiGroups", [])
            assert "secrets" not in rule.get("resources", [])


def test_the_only_write_is_the_election_lease_in_its_own_namespace() -> None:
    (role,) = _of_kind("Role")
    assert role["metadata"]["namespace"] == "claimtrail"
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["coordination.k8s.io"] and rule["resources"] == ["leases"]
        assert set(rule["verbs"]) <= {"get", "create", "update"}
    named = [r for r in role["rules"] if "update" in r["verbs"]]
    (watcher,) = [o for o in _of_kind("Deployment") if o["metadata"]["name"] == "claimtrail-watcher"]
    args = watcher["spec"]["template"]["spec"]["containers"][0]["args"]
    lease = next(a.split("=", 1)[1] for a in args if a.startswith("--lease-name="))
    assert [r["resourceNames"] for r in named] == [[lease]]


def test_watcher_runs_two_replicas_under_its_service_account() -> None:
    (watcher,) = [o for o in _of_kind("Deployment") if o["metadata"]["name"] == "claimtrail-watcher"]
    assert watcher["spec"]["replicas"] >= 2
    sa = watcher["spec"]["template"]["spec"]["serviceAccountName"]
    for binding in _of_kind("ClusterRoleBinding", "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "claimtrail"}]
    assert "--no-leader-election" not in watcher["spec"]["template"]["spec"]["containers"][0]["args"]


def test_api_has_a_service_and_a_disruption_budget_matching_its_pods() -> None:
    prod = build(DEPLOY / "overlays/production")
    api = next(o for o in prod if o["kind"] == "Deployment" and o["metadata"]["name"] == "claimtrail-api")
    labels = api["spec"]["template"]["metadata"]["labels"]
    svc = next(o for o in prod if o["kind"] == "Service" and o["metadata"]["name"] == "claimtrail-api")
    pdb = next(o for o in prod if o["kind"] == "PodDisruptionBudget")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < api["spec"]["replicas"]


def test_embedded_store_runs_one_replica_that_can_be_evicted() -> None:
    emb = build(DEPLOY / "overlays/embedded")
    api = next(o for o in emb if o["kind"] == "Deployment" and o["metadata"]["name"] == "claimtrail-api")
    pdb = next(o for o in emb if o["kind"] == "PodDisruptionBudget")
    assert (api["spec"]["replicas"], api["spec"]["strategy"]["type"]) == (1, "Recreate")
    assert api["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "CLAIMTRAIL_DSN", "value": "chdb:///var/lib/claimtrail/store"}]
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": pdb["spec"]["selector"]}


def test_clickhouse_is_two_shards_by_two_replicas_with_a_keeper_quorum() -> None:
    prod = build(DEPLOY / "overlays/production")
    (chi,) = [o for o in prod if o["kind"] == "ClickHouseInstallation"]
    (chk,) = [o for o in prod if o["kind"] == "ClickHouseKeeperInstallation"]
    (cluster,) = chi["spec"]["configuration"]["clusters"]
    assert cluster["layout"] == {"shardsCount": 2, "replicasCount": 2}
    assert chk["spec"]["configuration"]["clusters"][0]["layout"]["replicasCount"] == 3
    schema = next(o for o in prod if o["kind"] == "Job" and o["metadata"]["name"] == "claimtrail-schema")
    render = schema["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
    assert f"claimtrail schema --cluster {cluster['name']}" in render


def test_collector_config_is_generated_from_the_shared_file_and_mounted() -> None:
    built = build(DEPLOY)
    cm = next(o for o in built if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "otel-collector-config")
    assert cm["data"]["config.yaml"] == (DEPLOY / "otel-collector.yaml").read_text()
    collector = next(o for o in built if o["kind"] == "Deployment" and o["metadata"]["name"] == "otel-collector")
    volumes = collector["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": "otel-collector-config"}} in volumes


def test_replay_is_an_indexed_job_whose_shard_count_matches_its_completions() -> None:
    (job,) = build(DEPLOY / "replay")
    spec = job["spec"]
    args = spec["template"]["spec"]["containers"][0]["args"]
    shard = args[args.index("--shard") + 1]
    assert spec["completionMode"] == "Indexed"
    assert shard == f"$(JOB_COMPLETION_INDEX)/{spec['completions']}"
    env = {e["name"] for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert "JOB_COMPLETION_INDEX" in env


def _claimtrail_argvs() -> list[tuple[str, list[str]]]:
    """Every `claimtrail …` invocation in the built manifests, with $(VAR) references filled."""
    import re
    import shlex

    out = []
    for entry in ("overlays/production", "overlays/embedded", "replay"):
        for obj in build(DEPLOY / entry):
            for c in containers(obj):
                if not str(c["image"]).startswith("ghcr.io/claimtrail/claimtrail:"):
                    continue
                argv = list(c.get("command") or []) + list(c.get("args") or [])
                if argv[:2] == ["sh", "-c"]:
                    words = shlex.split(argv[2])
                    argv = words[: words.index(">")] if ">" in words else words
                elif not c.get("command"):
                    argv = ["claimtrail", *argv]  # the image's entrypoint is the claimtrail command
                if argv and argv[0] == "claimtrail":
                    argv = [re.sub(r"\$\(([A-Z_]+)\)", "0", a) for a in argv[1:]]
                    out.append((f"{entry}:{obj['metadata']['name']}/{c['name']}", argv))
    return out


ARGVS = _claimtrail_argvs()


@pytest.mark.parametrize(("where", "argv"), ARGVS, ids=[w for w, _ in ARGVS])
def test_every_claimtrail_invocation_parses_with_the_real_command_line(where: str, argv: list[str]) -> None:
    from audit.cli.main import build_parser

    args = build_parser().parse_args(argv)
    assert callable(getattr(args, "func", None)), f"{where}: {argv} names no command"


def test_the_manifests_run_the_commands_they_are_meant_to() -> None:
    commands = sorted({argv[0] + (" " + argv[1] if argv[0] == "ingest" else "") for _, argv in ARGVS})
    assert commands == ["dashboard", "ingest kube", "replay", "schema", "serve"]
