"""``claimtrail validate``: check DRA objects in files against the API server's rules and limits.

Every finding is printed on its own line as ``<object>: <field path>: <message>`` (or, with
``-o json``, as a JSON list of ``{"object", "path", "message"}``). The exit code is 1 when there is
any finding and 0 when every object would be admitted; unreadable files are a usage error (2).
Objects of other kinds in the same files (RBAC, quotas, …) are counted on stderr as not checked.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from audit.errors import UserError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check DRA objects against the API server's validation rules",
        description="Report every field of DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates "
                    "and DeviceTaintRules that the Kubernetes API server would refuse, and of the DRA parts of "
                    "Nodes (taints) and Pods (resourceClaims and the containers' claim references).",
    )
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                        help="YAML or JSON file with Kubernetes objects (repeatable)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `claimtrail --help` stays fast and independent of the CEL binding.
    from audit.dra.loader import LoadError, load_documents, repeated
    from audit.dra.validate import VALIDATED_KINDS, is_validated, validate_object

    sourced: list[tuple[str, dict[str, Any]]] = []
    for path in args.files:
        try:
            sourced.extend(load_documents(path))
        except LoadError as exc:
            raise UserError(str(exc)) from None
    for later, earlier, label in repeated(sourced):
        print(f"warning: {sourced[later][0]}: {label} is also defined in {sourced[earlier][0]}; each is checked, "
              "and a cluster read from these files keeps the later", file=sys.stderr)
    objects = [raw for _source, raw in sourced]
    findings = [finding for obj in objects for finding in validate_object(obj)]
    if args.output == "json":
        print(json.dumps([{"object": f.obj, "path": f.path, "message": f.message} for f in findings], indent=2))
    else:
        for finding in findings:
            print(finding)
        checked = sum(1 for obj in objects if is_validated(obj))
        summary = f"{checked} object{'' if checked == 1 else 's'} checked, {len(findings)} finding{'' if len(findings) == 1 else 's'}"
        skipped = sorted({str(obj.get("kind")) for obj in objects if not is_validated(obj) and obj.get("kind")})
        if skipped:
            summary += f"; not checked (kinds other than {', '.join(VALIDATED_KINDS)}): {', '.join(skipped)}"
        print(summary, file=sys.stderr)
    return 1 if findings else 0
