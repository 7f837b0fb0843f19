"""``claimtrail allocate``: run the per-node allocator on objects from files, as the scheduler would.

Claims are allocated together on one node against everything else in the files: slices,
classes, taint rules, and claims that already carry ``status.allocation`` (they occupy their
devices). ``-o json`` (the default when stdout is not a terminal) prints exactly one JSON object on
stdout — success, ``unsatisfiable`` or ``error`` — with exit code 0, 1 or 2, also for unreadable
input; on a terminal the default is ``-o text``, so a person reads a sentence and a pipe still
gets the JSON contract. API
validation findings are warnings on stderr; allocation proceeds as upstream's allocator would.
A ``--node`` the files never name, or files with no claim to allocate, are refused in text; in
JSON and YAML they are a warning on stderr and the document is upstream's answer, since that
document is the upstream allocator's contract.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from typing import Any

import yaml

from audit.allocator import (
    AllocatedState,
    AllocationOutcome,
    Allocator,
    Features,
    GateError,
    Inventory,
    InventoryError,
    Status,
)
from audit.dra.loader import LoadError, load_documents, repeated
from audit.dra.model import (
    DeviceClass,
    DeviceTaintRule,
    KubeObject,
    ModelError,
    Node,
    ResourceClaim,
    ResourceSlice,
    parse_object,
    supported_kind,
)
from audit.errors import UserError


class _Failure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "allocate",
        help="allocate claims on one node exactly as kube-scheduler 1.36 would",
        description="Allocate ResourceClaims on one node against the slices, classes and allocated claims in the files.",
    )
    # -f and --node are required, but checked in run() so that a missing one is still reported as
    # the single JSON error document of the output contract.
    parser.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="FILE",
                        help="YAML or JSON file with Kubernetes objects (repeatable, required)")
    parser.add_argument("--node", default="", metavar="NAME", help="node to allocate on (required)")
    parser.add_argument("--node-label", dest="node_labels", action="append", default=[], metavar="KEY=VALUE",
                        help="node label, added to or overriding the Node object's labels (repeatable)")
    parser.add_argument("--feature-gates", action="append", default=[], metavar="NAME=true|false,...",
                        help="feature gates (repeatable; default: Kubernetes 1.36 defaults)")
    parser.add_argument("--claim", dest="claims", action="append", default=[], metavar="[NS/]NAME",
                        help="claim to allocate, in order (default: every unallocated claim in file order)")
    parser.add_argument("--explain", action="store_true", help="add per-device evidence for every tier")
    parser.add_argument("--max-steps", type=int, default=None, metavar="N",
                        help="give up (error step_budget) after N search steps instead of searching to the end, "
                             "as kube-scheduler gives up at its filter timeout (default: no limit)")
    parser.add_argument("-o", "--output", choices=("json", "yaml", "text"), default=None,
                        help="output format (default: text on a terminal, json otherwise)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.output is None:
        args.output = "text" if sys.stdout.isatty() else "json"
    try:
        outcome, steps_claims = _allocate(args)
    except _Failure as failure:
        if args.output == "text":
            raise UserError(failure.message) from None
        _emit(args.output, {"error": {"code": failure.code, "message": failure.message}})
        return 2
    if args.output == "text":
        print(render_text(outcome, args.node, steps_claims))
    else:
        _emit(args.output, outcome_document(outcome, args.explain))
    return {Status.SUCCESS: 0, Status.UNSATISFIABLE: 1}.get(outcome.status, 2)


def _emit(output: str, document: dict[str, Any]) -> None:
    if output == "yaml":
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))
    else:
        sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")


def outcome_document(outcome: AllocationOutcome, explain: bool) -> dict[str, Any]:
    """The JSON contract of ``claimtrail allocate -o json``."""
    doc: dict[str, Any]
    if outcome.status is Status.SUCCESS:
        doc = {"allocations": [a.to_api() for a in outcome.allocations]}
    elif outcome.status is Status.UNSATISFIABLE:
        doc = {"unsatisfiable": True, "message": outcome.message}
    else:
        doc = {"error": {"code": outcome.error_code, "message": outcome.message}}
    if explain:
        doc["explanation"] = {
            "steps": outcome.steps,
            "tiers": [
                {"claim": t.claim, "request": t.request, "subrequestIndex": t.subrequest_index,
                 "verdicts": [{"device": v.device, "reason": v.reason, **({"detail": v.detail_dict()} if v.detail else {})}
                              for v in t.verdicts]}
                for t in outcome.evidence
            ],
        }
    return doc


def render_text(outcome: AllocationOutcome, node: str, claims: list[str]) -> str:
    lines: list[str] = []
    if outcome.status is Status.SUCCESS:
        lines.append(f"node {node}: allocated {len(outcome.allocations)} claim(s) in {outcome.steps} steps")
        for key, allocation in zip(claims, outcome.allocations, strict=False):
            lines.append(f"claim {key}")
            for result in allocation.results:
                lines.append(f"  {result['request']} -> {result['driver']}/{result['pool']}/{result['device']}")
    elif outcome.status is Status.UNSATISFIABLE:
        lines.append(f"node {node}: {outcome.message} ({outcome.steps} steps)")
    else:
        lines.append(f"node {node}: error ({outcome.error_code}): {outcome.message}")
    for tier in outcome.evidence:
        counts = Counter(v.reason for v in tier.verdicts)
        summary = ", ".join(f"{reason}={n}" for reason, n in sorted(counts.items()))
        lines.append(f"tier {tier.claim} {tier.request}: {summary or 'no devices'}")
    return "\n".join(lines)


def _warn_findings(raw_objects: list[tuple[str, dict[str, Any]]]) -> None:
    try:
        validate = importlib.import_module("audit.dra.validate")
    except ImportError as exc:
        # Validation is advisory here: allocation proceeds, but say that it was skipped.
        print(f"warning: API validation unavailable ({exc}); allocating without it", file=sys.stderr)
        return
    for _source, raw in raw_objects:
        for finding in validate.validate_object(raw):
            print(f"warning: {finding}", file=sys.stderr)


def _load(files: list[str]) -> list[tuple[str, KubeObject]]:
    raw_objects: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        try:
            raw_objects.extend(load_documents(path))
        except LoadError as exc:
            raise _Failure("invalid_input", str(exc)) from None
    _warn_findings([(s, r) for s, r in raw_objects if supported_kind(r)])
    superseded: set[int] = set()
    for later, earlier, label in repeated(raw_objects):
        # (the same file given twice repeats its labels: the message still names both places)
        print(f"warning: {raw_objects[later][0]}: {label} is also defined in {raw_objects[earlier][0]}; "
              "the later definition is used", file=sys.stderr)
        superseded.add(earlier)
    parsed: list[tuple[str, KubeObject]] = []
    for i, (source, raw) in enumerate(raw_objects):
        if i in superseded:
            continue
        if not supported_kind(raw):
            print(f"warning: {source}: ignoring kind {raw.get('kind')!r} (not used for allocation)", file=sys.stderr)
            continue
        try:
            parsed.append((source, parse_object(raw)))
        except ModelError as exc:
            raise _Failure("invalid_input", f"{source}: {exc}") from None
    return parsed


def _node(objects: list[tuple[str, KubeObject]], name: str, labels: list[str]) -> Node:
    node = next((o for _, o in objects if isinstance(o, Node) and o.name == name), Node(name=name))
    extra: dict[str, str] = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _Failure("invalid_argument", f"--node-label {item!r}: expected KEY=VALUE")
        extra[key] = value
    return node.with_labels(extra) if extra else node


def _refuse_or_warn(args: argparse.Namespace, code: str, message: str) -> None:
    """A mistake that upstream's allocator answers anyway: refused in text, a warning otherwise.

    The JSON document (and YAML, the same document) must give the upstream allocator's answer
    for any input that allocator accepts (tests/allocator compares them), so there the mistake is
    only said on stderr; text is for a person and has no such contract."""
    if args.output == "text":
        raise _Failure(code, message)
    print(f"warning: {message}; answered as kube-scheduler would", file=sys.stderr)


def _unknown_node(objects: list[tuple[str, KubeObject]], name: str, labels: list[str], placing: bool) -> str | None:
    """Why ``--node`` looks like a typo, if the files never name it: else a typo would be
    reported as "cannot allocate", as an empty allocation, or as the first object the search
    misses (a DeviceClass of files that hold only claims).

    Nodes are named by Node objects and by node-local slices or devices (``nodeName``). A node
    described only by ``--node-label`` is a hypothetical node and is allowed, as is any node
    when the files' slices name none (every slice is then ``allNodes`` or selector-based).
    Files with no Node and no slice describe no node at all; when they hold no claim to place
    either (``placing`` false), that is the one mistake ``_nothing_to_allocate`` names."""
    if labels:
        return None
    known: set[str] = set()
    for _, obj in objects:
        if isinstance(obj, Node):
            known.add(obj.name)
        elif isinstance(obj, ResourceSlice):
            if obj.node_name:
                known.add(obj.node_name)
            known.update(d.node_name for d in obj.devices if d.node_name)
    if name in known:
        return None
    if known:
        listed = ", ".join(sorted(known)[:10]) + (", …" if len(known) > 10 else "")
        return f"--node {name}: no node {name} in the input (nodes: {listed})"
    if placing and not any(isinstance(obj, ResourceSlice) for _, obj in objects):
        return f"--node {name}: no node {name} in the input (the files hold no Node and no ResourceSlice)"
    return None


def _nothing_to_allocate(files: list[str], claims: list[ResourceClaim]) -> str:
    """Why no claim is allocated when none was named: upstream answers an empty allocation, which
    reads as a success although the files (an empty one, the wrong one) held nothing to do."""
    named = list(dict.fromkeys(files))
    where = f"the file{'s' if len(named) > 1 else ''}"
    if claims:
        return (f"-f {', '.join(named)}: every ResourceClaim in {where} is already allocated, so nothing to "
                "allocate (--claim NAME allocates one again)")
    return f"-f {', '.join(named)}: no ResourceClaim in {where}, so nothing to allocate"


def _select_claims(claims: list[ResourceClaim], wanted: list[str]) -> list[ResourceClaim]:
    if not wanted:
        return [c for c in claims if c.allocation is None]
    chosen: list[ResourceClaim] = []
    for ref in wanted:
        ns, sep, name = ref.rpartition("/")
        matches = [c for c in claims if c.name == name and (not sep or c.namespace == ns)]
        if not matches:
            raise _Failure("claim_not_found", f"--claim {ref}: no ResourceClaim with that name in the files")
        unallocated = [c for c in matches if c.allocation is None]
        for found in unallocated or matches:
            if any(found is c for c in chosen):
                raise _Failure("invalid_argument", f"--claim {ref}: ResourceClaim {found.key} is already listed")
            chosen.append(found)
    return chosen


def _allocate(args: argparse.Namespace) -> tuple[AllocationOutcome, list[str]]:
    if not args.files:
        raise _Failure("invalid_argument", "-f FILE is required (the objects to allocate against)")
    if not args.node:
        raise _Failure("invalid_argument", "--node NAME is required (the node to allocate on)")
    max_steps = getattr(args, "max_steps", None)  # (a namespace built by a caller may not have it)
    if max_steps is not None and max_steps < 0:
        raise _Failure("invalid_argument", f"--max-steps: {max_steps} is negative (give 0 or more steps)")
    try:
        features, no_effect = Features.parse_gates(",".join(args.feature_gates))
    except GateError as exc:
        raise _Failure("invalid_argument", f"--feature-gates: {exc}") from None
    for gate in no_effect:
        print(f"warning: --feature-gates: {gate} does not change per-node allocation; ignored", file=sys.stderr)
    objects = _load(args.files)
    node = _node(objects, args.node, args.node_labels)
    claims = [o for _, o in objects if isinstance(o, ResourceClaim)]
    to_allocate = _select_claims(claims, args.claims)
    if not to_allocate:
        _refuse_or_warn(args, "no_claims", _nothing_to_allocate(args.files, claims))
    unknown = _unknown_node(objects, args.node, args.node_labels, placing=bool(to_allocate))
    if unknown:
        _refuse_or_warn(args, "node_not_found", unknown)
    allocating = {id(c) for c in to_allocate}
    try:
        state = AllocatedState.from_claims(c for c in claims if c.allocation is not None and id(c) not in allocating)
        inventory = Inventory(
            slices=[o for _, o in objects if isinstance(o, ResourceSlice)],
            classes=[o for _, o in objects if isinstance(o, DeviceClass)],
            taint_rules=[o for _, o in objects if isinstance(o, DeviceTaintRule)],
            features=features,
        )
        outcome = Allocator(inventory, state).allocate(node, to_allocate, explain=args.explain or args.output == "text",
                                                       max_steps=max_steps)
    except (InventoryError, ValueError) as exc:
        raise _Failure("invalid_input", str(exc)) from None
    return outcome, [c.key for c in to_allocate]
