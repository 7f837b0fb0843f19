"""A claim's spec parsed through the caller's memo: once per distinct spec, the same result.

Claims made from one template share their spec, so ``parse_object(raw, claim_specs)`` parses
it once. These tests show the typed claim equals the one parsed without the memo, that distinct
specs never share an entry, and that a spec with an error raises every time and is not kept.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from audit.dra.model import ModelError, ResourceClaim, parse_object

CLAIMS = yaml.safe_load_all("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: job-1-gpu, namespace: research, uid: u-1}
spec:
  devices:
    requests:
      - name: gpu
        firstAvailable:
          - name: h100
            deviceClassName: gpu.nvidia.com
            count: 2
            selectors:
              - cel: {expression: "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}
          - name: a100
            deviceClassName: gpu.nvidia.com
            count: 2
    constraints:
      - matchAttribute: gpu.nvidia.com/productName
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: job-2-gpu, namespace: team-a, uid: u-2}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, count: 4}
""")
SPEC_CLAIMS = list(CLAIMS)


def _renamed(claim: dict, name: str, uid: str) -> dict:
    out = copy.deepcopy(claim)
    out["metadata"] = {**out["metadata"], "name": name, "uid": uid}
    return out


@pytest.mark.parametrize("claim", SPEC_CLAIMS, ids=["first-available", "exactly"])
def test_claims_sharing_a_spec_parse_it_once_and_equal_the_plain_parse(claim: dict) -> None:
    memo: dict = {}
    first = parse_object(claim, memo)
    second = parse_object(_renamed(claim, "other-gpu", "u-9"), memo)
    assert isinstance(first, ResourceClaim) and isinstance(second, ResourceClaim)
    assert first == parse_object(claim)
    assert second == parse_object(_renamed(claim, "other-gpu", "u-9"))
    assert second.spec is first.spec
    assert (second.name, second.uid) == ("other-gpu", "u-9")
    assert len(memo) == 1


@pytest.mark.parametrize(("path", "value"), [
    (("spec", "devices", "requests", 0, "exactly", "count"), 8),                 # another count
    (("spec", "devices", "requests", 0, "exactly", "count"), 4.0),               # 4.0 is not 4
    (("spec", "devices", "requests", 0, "exactly", "deviceClassName"), "other"),  # another class
    (("spec", "devices", "requests", 0, "name"), "gpus"),                        # another name
], ids=["count", "float-count", "class", "request-name"])
def test_a_spec_differing_anywhere_is_parsed_on_its_own(path: tuple, value: object) -> None:
    base = SPEC_CLAIMS[1]
    changed = copy.deepcopy(base)
    target = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    memo: dict = {}
    parse_object(base, memo)
    try:
        plain = parse_object(changed)
    except ModelError as exc:
        with pytest.raises(ModelError) as memo_exc:
            parse_object(changed, memo)
        assert str(memo_exc.value) == str(exc)
        assert len(memo) == 1
        return
    parsed = parse_object(changed, memo)
    assert parsed == plain
    assert len(memo) == 2


def test_a_spec_with_an_error_raises_every_time_and_is_not_kept() -> None:
    bad = copy.deepcopy(SPEC_CLAIMS[1])
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = "four"
    memo: dict = {}
    for name in ("a", "b"):
        with pytest.raises(ModelError, match=rf"ResourceClaim team-a/{name}: spec.devices.requests\[0\].exactly.count"):
            parse_object(_renamed(bad, name, name), memo)
    assert memo == {}
