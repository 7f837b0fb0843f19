"""``claimtrail why --dump``: the offline answer from a kubectl dump with NVIDIA-like slices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
PENDING = str(FIXTURES / "cluster-pending.yaml")
ALLOCATED = str(FIXTURES / "cluster-allocated.yaml")

H100_REASONS = {"node_filtered": 4, "in_use": 1, "request_selector_mismatch": 1, "unhealthy": 1,
                "taint_not_tolerated": 1}


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["why", *argv, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pending_pod_h100_reasons_and_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(capsys, "--dump", PENDING, "team-a/train-1", "--model", "H100")
    assert answer["reasons"] == H100_REASONS
    assert answer["skipped"] is True and answer["outcome"]["result"] == "pending"
    assert answer["summary"] == (
        "H100 skipped: of 8 H100, 2 on nodes excluded by node affinity, 2 on nodes with taints the pod does not "
        "tolerate, 1 in use, 1 not matching the request's selectors, 1 unhealthy (taint gpu.nvidia.com/unhealthy), "
        "1 with an untolerated taint (taint example.com/maintenance). Pod not allocated (pending). "
        "If scheduled now: A100 gpu-3 on node a100-07 (tier 1).")
    assert "devices" not in answer


def test_pending_pod_is_not_said_to_skip_the_model_it_would_get_now(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(capsys, "--dump", PENDING, "team-a/train-1", "--model", "A100")
    assert answer["skipped"] is False and answer["outcome"]["result"] == "pending"
    assert answer["summary"] == (
        "A100 not yet allocated: of 2 A100, 1 in use, 1 available. Pod not allocated (pending). "
        "If scheduled now: A100 gpu-3 on node a100-07 (tier 1).")


def test_allocated_pod_is_explained_for_its_a100(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _json(capsys, "--dump", ALLOCATED, "team-a/train-1", "--model", "H100", "--devices")
    assert answer["reasons"] == H100_REASONS
    assert answer["outcome"] == {"result": "allocated", "model": "A100", "devices": ["gpu.nvidia.com/a100-07/gpu-3"],
                                 "node": "a100-07", "tier": 1, "retry_class": ""}
    assert str(answer["summary"]).endswith("Allocated A100 gpu-3 on node a100-07 (tier 1).")
    devices = {d["device"]: d for d in answer["devices"]}
    assert devices["gpu.nvidia.com/h100-01/gpu-1"]["reason"] == "unhealthy"
    assert devices["gpu.nvidia.com/h100-01/gpu-0"]["reason"] == "in_use"
    assert devices["gpu.nvidia.com/h100-03/gpu-0"]["detail"]["cause"] == "taint"
    a100 = _json(capsys, "--dump", ALLOCATED, "team-a/train-1", "--model", "A100")
    assert a100["skipped"] is False and a100["reasons"] == {"selected": 1, "in_use": 1}


def test_policy_file_supplies_version_and_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("""apiVersion: claimtrail.io/v1alpha1
kind: Policy
metadata: {name: lab}
spec:
  version: v7
  tenants:
  - name: team-b
    namespaces: [team-b]
  - name: team-a
    namespaces: [team-a]
    quotas:
      A100: {nominal: 0, borrowingLimit: 0}
""")
    answer = _json(capsys, "--dump", PENDING, "team-a/train-1", "--model", "A100", "--policy", str(policy))
    assert answer["policy_version"] == "v7"
    assert answer["blockers"] == [{"code": "quota_exhausted", "tier": 1, "tenant": "team-a", "model": "A100",
                                   "used": 0, "requested": 1, "nominal": 0, "limit": 0, "lendable": 0}]


def test_text_output_has_the_sentence_and_a_reason_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["why", "--dump", PENDING, "team-a/train-1", "--model", "H100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("H100 skipped: of 8 H100")
    assert any(line.split() == ["node_filtered", "4"] for line in lines)


@pytest.mark.parametrize(("argv", "message"), [
    (["--dump", PENDING, "train-1", "--model", "H100"], "pod 'train-1': expected NAMESPACE/POD"),
    (["--dump", PENDING, "team-a/ghost", "--model", "H100"], "Pod team-a/ghost: not found in the cluster view"),
    (["--dump", "/nonexistent/cluster.yaml", "team-a/train-1", "--model", "H100"], "/nonexistent/cluster.yaml"),
    (["--dump", PENDING, "team-a/train-1", "--model", "H100", "--policy", PENDING], "--policy"),
    (["team-a/train-1", "--model", "H100", "--policy", PENDING], "--policy applies to --dump only"),
    (["--dump", PENDING, "team-a/train-1", "--model", "H100", "--server", "http://x"], "takes no --server"),
    (["--dump", PENDING, "team-a/train-1", "--model", "H100", "--cluster", "lab"],
     "--dump answers offline, from one cluster; it takes no --server, --token or --cluster"),
    (["--dump", PENDING, "team-a/train-1", "--model", ""], "--model '': empty; give a device model, e.g. --model H100"),
    (["team-a/train-1", "--model", " "], "--model ' ': empty; give a device model, e.g. --model H100"),
    (["--dump", PENDING, "team-a/train-1", "--model", "h100"],
     "--model 'h100': not a device model this cluster dump or policy knows; did you mean H100?"),
    (["--dump", PENDING, "team-a/train-1", "--model", "a100 "],
     "--model 'a100 ': not a device model this cluster dump or policy knows; did you mean A100?"),
    (["--dump", PENDING, "team-a/train-1", "--model", "B200"],
     "--model 'B200': not a device model this cluster dump or policy knows (known: A100, H100, L4, L40S)"),
], ids=["bad-pod-name", "unknown-pod", "missing-dump", "bad-policy", "policy-without-dump", "dump-and-server", "dump-and-cluster",
        "empty-model", "blank-model-online", "model-in-the-wrong-case", "model-with-a-space", "unknown-model"])
def test_user_mistakes_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["why", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_objects_the_explanation_does_not_use_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "with-extra.yaml"
    dump.write_text(Path(PENDING).read_text() + "- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: x}}\n")
    assert main(["why", "--dump", str(dump), "team-a/train-1", "--model", "H100", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["reasons"] == H100_REASONS
    assert "ConfigMap cm: not a kind the allocator reads" in captured.err


DEVICE_PLUGIN = str(Path(PENDING).parent / "cluster-device-plugin.yaml")


@pytest.mark.parametrize(("pod", "flags"), [
    pytest.param("team-a/train-4", ["--devices"], id="pending-per-device"),
    pytest.param("team-a/serve-1", [], id="bound"),
])
def test_a_device_plugin_pod_is_named_as_one_not_as_requesting_nothing(pod: str, flags: list[str],
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Its GPUs are a count with no device identities: per-device reasons and a bound pod's are
    refused saying so, instead of "the pod requests no devices", which a pod holding GPUs plainly
    does (a pending one is answered by the decision it would get now)."""
    assert main(["why", "--dump", DEVICE_PLUGIN, pod, "--model", "H100", *flags]) == 2
    err = capsys.readouterr().err.strip()
    gpus = pod.rsplit("-", 1)[1] if pod.startswith("team-a/train") else "6"
    assert err.endswith(f"Pod {pod}: spec.containers[*].resources.limits.nvidia.com/gpu: the pod asks for {gpus} "
                        "GPU(s) through the device plugin, which names no devices; per-device reasons need a DRA "
                        "claim (its decision record answers without them)")
    assert "Traceback" not in err and len(err.splitlines()) == 1
