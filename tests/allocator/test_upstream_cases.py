"""Cases where ClaimTrail once answered differently from the upstream allocator, with upstream's answer.

Each file in ``upstream/`` holds the objects, the node, the features and, under ``expect``, the
document the upstream allocator (k8s.io/dynamic-resource-allocation v0.36.2) printed for them;
`claimtrail allocate -o json` must say the same. The comparison itself is tested on documents
that differ in exactly one respect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.allocator import Quirks, Status
from tests.allocator.helpers import picks, run
from tests.allocator.upstream_cases import divergence, feature_gates, run_claimtrail

CASES = Path(__file__).parent / "upstream"
CASE_FILES = sorted(CASES.glob("*.yaml"))


def load(name: str) -> dict[str, Any]:
    case: dict[str, Any] = yaml.safe_load((CASES / f"{name}.yaml").read_text())
    return case


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_claimtrail_answers_as_upstream(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    assert divergence(case["expect"], run_claimtrail(case, tmp_path)) is None


def test_every_divergence_class_has_a_case() -> None:
    assert {p.stem for p in CASE_FILES} >= {
        "capacity-recheck-keeps-constraint-value", "capacity-recheck-leftover-makes-all-mode-fatal",
        "subrequest-named-alone-in-class-error", "subrequest-named-alone-in-constraint-error",
        "all-mode-cel-error-in-earlier-pool-wins", "incomplete-pool-sorts-by-name-only",
        "invalid-pool-sorts-by-name-only", "empty-counters-unknown-set-invalidates-pool",
        "empty-counters-unknown-set-fails-on-node", "invalid-pool-unreached-fails-on-node",
        "counter-only-invalid-pool-fails-on-node", "invalid-pool-skipped-before-selectors",
        "distinct-attribute-without-consumable-capacity", "stable-allocator-ignores-capacity-requests",
        "share-without-consumed-capacity-consumes-counters-again",
        "cel-sign-is-not-a-quantity-method", "cel-mixed-list-literal-does-not-compile",
        "cel-includes-without-list-type-attributes", "cel-modulus-by-zero-error-text", "cel-integer-overflow-error-text",
        "cel-list-extension-functions", "cel-index-of-past-the-end-finds-nothing", "cel-optional-field-selection",
        "cel-two-variable-comprehension", "cel-non-bool-selector-error-text", "cel-ip-cidr-library", "cel-url-library",
        "cel-regex-find", "cel-regex-literal-refused-when-planned", "cel-format-string",
    }


@pytest.mark.parametrize(("quirk_on", "expected"), [
    pytest.param(True, None, id="quirk-on-leftover-numa-0-rejects-device-a"),
    pytest.param(False, [("claim-0", "req-0", "node-1/m"), ("claim-1", "req-0/any", "node-1/a")],
                 id="quirk-off-constraint-cleaned-up-device-a-allocated"),
])
def test_capacity_recheck_keeps_constraint_quirk(quirk_on: bool, expected: list[tuple[str, str, str]] | None) -> None:
    case = load("capacity-recheck-keeps-constraint-value")
    outcome = run(case["objects"], gates=feature_gates(case["features"]),
                  quirks=Quirks(capacity_recheck_keeps_constraint=quirk_on))
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert outcome.status is Status.SUCCESS
        assert picks(outcome) == expected


def test_capacity_recheck_keeps_constraint_is_on_by_default() -> None:
    assert Quirks().capacity_recheck_keeps_constraint is True
    assert Quirks.none().capacity_recheck_keeps_constraint is False


SELECTOR = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}


def allocation(device: str, selector: dict[str, Any] | None = SELECTOR, **extra: Any) -> dict[str, Any]:
    result = {"request": "req-0", "driver": "gpu.example.com", "pool": "node-1", "device": device, **extra}
    return {"allocations": [{"claim": "default/claim-0", "results": [result], "nodeSelector": selector}]}


def error(message: str) -> dict[str, Any]:
    return {"error": {"code": "allocate", "message": message}}


UNSAT = {"unsatisfiable": True, "message": "cannot allocate all claims"}


@pytest.mark.parametrize(("upstream", "ours", "found"), [
    pytest.param(allocation("a"), allocation("a"), None, id="same-device-same-selector"),
    pytest.param(allocation("a"), allocation("b"), "claim claim-0 results", id="other-device"),
    pytest.param(allocation("a"), allocation("a", selector=None), "claim claim-0 nodeSelector", id="other-node-selector"),
    pytest.param(allocation("a"), UNSAT, "outcome: upstream allocations, claimtrail unsatisfiable", id="unsatisfiable-instead"),
    pytest.param(UNSAT, error("x"), "outcome: upstream unsatisfiable, claimtrail error", id="error-instead"),
    pytest.param(error("request h100: x"), error("request req-0/h100: x"), "error text", id="other-error-text"),
    pytest.param(error("invalid resource pools were encountered"),
                 error("invalid resource pools were encountered: pool p is invalid: counter set s not found"), None,
                 id="invalid-pools-detail-is-the-one-allowed-addition"),
    pytest.param(error("cannot add device"), error("cannot add device: more"), "error text", id="no-other-suffix-allowed"),
    pytest.param(allocation("a", shareID="1"), allocation("a"), "claim claim-0 results", id="shared-vs-exclusive"),
    pytest.param(allocation("a", shareID="1", consumedCapacity={"cores": "8"}),
                 allocation("a", shareID="2", consumedCapacity={"cores": "8000m"}), None,
                 id="share-ids-random-quantities-by-value"),
    pytest.param(allocation("a", consumedCapacity={"cores": "8"}), allocation("a", consumedCapacity={"cores": "4"}),
                 "claim claim-0 results", id="other-consumed-capacity"),
])
def test_divergence_names_the_first_difference(upstream: dict[str, Any], ours: dict[str, Any], found: str | None) -> None:
    got = divergence(upstream, ours)
    if found is None:
        assert got is None
    else:
        assert got is not None and got.startswith(found)
