"""``claimtrail policy check FILE``: validate a policy and flag promises the cluster cannot keep.

FILE may hold the Policy alone or a whole scenario; the ResourceSlices and a Workload's
``nodePools`` of the ``--cluster`` files, or without them of FILE itself, give the device count
per model (through the policy's model table): a cluster given apart replaces the one FILE
describes, and one that names no device is refused rather than left unchecked. Every validation error is printed with its field path, and so is every setting the
document states that another makes meaningless (``audit.policy.contradictions``); Σ nominal
quota above the devices of a model is flagged. Exit 0: valid; 1: valid but over-committed; 2:
invalid or contradictory.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from audit.cli.policyfile import yaml_documents
from audit.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("policy", help="work with ClaimTrail policy documents")
    sub = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    check = sub.add_parser("check", help="validate a policy and check quotas against cluster capacity")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--cluster", metavar="FILE", action="append", default=[],
                       help="YAML with ResourceSlices (or a scenario) whose devices the quotas must fit, instead "
                            "of those in FILE; repeat it for a cluster in several files")
    check.set_defaults(func=run_check)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])




def device_counts(docs: list[tuple[str, Any]], policy: Any) -> dict[str, int]:
    """Devices per model of the ResourceSlices and Workload node pools among ``docs`` (where each
    is, the document), each read as ``validate`` and ``simulate`` read it."""
    from audit.dra.model import ModelError, ResourceSlice, parse_object
    from ingest.simulate.cluster import product
    from ingest.simulate.scenario import ScenarioError, parse_workload

    counts: dict[str, int] = {}
    for where, d in docs:
        if not isinstance(d, dict):
            continue
        if d.get("kind") == "ResourceSlice":
            try:
                sl = parse_object(d)
            except ModelError as exc:
                raise UserError(f"{where}: {exc}") from None
            assert isinstance(sl, ResourceSlice)
            for dev in sl.devices:
                m = policy.model_of(sl.driver, dev.raw_attributes)
                counts[m] = counts.get(m, 0) + 1
        elif d.get("kind") == "Workload":
            try:
                pools = parse_workload(d, where).pools
            except ScenarioError as exc:
                raise UserError(str(exc)) from None
            for pool in pools:
                if pool.device_plugin:
                    continue
                name = product(pool.model)["productName"]
                m = policy.model_of("gpu.nvidia.com", {"productName": {"string": name}})
                counts[m] = counts.get(m, 0) + pool.nodes * pool.gpus_per_node
    return counts


def run_check(args: argparse.Namespace) -> int:
    from audit.policy import capacity_findings, contradictions, parse_policy, policy_findings

    docs = yaml_documents(args.file)
    policies = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Policy"]
    if not policies:
        raise UserError(f"{args.file}: no kind: Policy document found")
    cluster_docs = [] if args.cluster else [(f"{args.file}#{i}", d) for i, d in enumerate(docs)]
    for path in args.cluster:
        cluster_docs.extend((f"--cluster {path}#{i}", d) for i, d in enumerate(yaml_documents(path, "--cluster")))
    status = 0
    for doc in policies:
        errors = policy_findings(doc)
        if errors:
            for e in errors:
                print(f"{args.file}: {e}", file=sys.stderr)
            status = 2
            continue
        policy = parse_policy(doc)
        refused = contradictions(doc, policy)
        if refused:
            for e in refused:
                print(f"{args.file}: {e}", file=sys.stderr)
            status = 2
            continue
        counts = device_counts(cluster_docs, policy)
        if not counts and args.cluster:
            raise UserError(f"--cluster {', '.join(args.cluster)}: no ResourceSlice device or Workload nodePool to "
                            "check the quotas against")
        if not counts:
            print(f"Policy {policy.name} version {policy.version}: valid (digest {policy.digest[:16]}); "
                  "no devices given, capacity not checked")
            continue
        findings = capacity_findings(policy, counts)
        for f in findings:
            print(f"warning: {f}", file=sys.stderr)
        if findings:
            status = max(status, 1)
        have = ", ".join(f"{m} {n}" for m, n in sorted(counts.items()))
        print(f"Policy {policy.name} version {policy.version}: valid (digest {policy.digest[:16]}); devices: {have}"
              + ("; quota over-committed" if findings else ""))
    return status
