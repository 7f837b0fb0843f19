"""``claimtrail why NAMESPACE/POD --model M``: why the pod did (not) get model M.

Asks the audit API (``--server``, default ``CLAIMTRAIL_API`` or http://127.0.0.1:8080, token from
``--token`` or ``CLAIMTRAIL_TOKEN``) about the pod's latest decision, or answers offline from a
cluster dump (``--dump``: what ``kubectl get nodes,pods,deviceclasses,resourceslices,
resourceclaims,devicetaintrules -A -o yaml`` prints) with an optional ``--policy FILE``. For a pod
holding no devices the answer also says what it would get if scheduled now (``would_get``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from audit.cli.apiurl import DEFAULT_API, api_url, auth_headers
from audit.errors import UserError
from audit.records import Blocker


def register(sub: Any) -> None:
    p = sub.add_parser("why", help="why a pod did not get a device model (H100 skipped?)")
    p.add_argument("pod", metavar="NAMESPACE/POD")
    p.add_argument("--model", required=True, help="device model, e.g. H100")
    p.add_argument("--server", default=None, help="audit API URL (default CLAIMTRAIL_API or " + DEFAULT_API + ")")
    p.add_argument("--token", default=None, help="bearer token (default CLAIMTRAIL_TOKEN)")
    p.add_argument("--cluster", default=None, help="the pod's cluster, when the store holds pods of its name in more "
                   "than one")
    p.add_argument("--dump", metavar="FILE", help="answer offline from a kubectl -o yaml dump of the cluster")
    p.add_argument("--policy", metavar="FILE", help="policy document for --dump (quotas, device-model table)")
    p.add_argument("--devices", action="store_true", help="list every device of the model with its reason")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _split_pod(text: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise UserError(f"pod {text!r}: expected NAMESPACE/POD")
    return ns, name


def _offline(args: argparse.Namespace, ns: str, name: str) -> dict[str, Any]:

    from audit.cli.policyfile import load_policy, policy_document
    from audit.dra.loader import LoadError, load_documents
    from audit.explain import ClusterView, UnknownModel, ViewError, check_model, explain, known_models

    try:
        docs = load_documents(args.dump)
    except LoadError as exc:  # already names the file
        raise UserError(f"--dump {exc}") from None
    policy = load_policy(policy_document(args.policy), f"--policy {args.policy}") if args.policy else None
    view = ClusterView.from_objects(raw for _, raw in docs)
    for note in view.ignored:
        print(f"claimtrail why: --dump {args.dump}: {note}", file=sys.stderr)
    try:
        # the same check the API makes of a why question, so both answer a misspelt model alike
        model = check_model(args.model, known_models(view, policy), "--model", "this cluster dump or policy")
        return explain(view, (ns, name), model, policy, detail=args.devices).to_dict()
    except (ViewError, UnknownModel) as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a malformed object in the dump, named by the parser
        raise UserError(f"--dump {args.dump}: {exc}") from None


def _online(args: argparse.Namespace, ns: str, name: str) -> dict[str, Any]:
    import httpx

    server, headers = api_url(args.server), auth_headers(args.token)
    params = {"model": args.model, **({"detail": "devices"} if args.devices else {}),
              **({"cluster": args.cluster} if args.cluster else {})}
    url = f"{server}/v1/pods/{quote(ns, safe='')}/{quote(name, safe='')}/why"
    try:
        response = httpx.get(url, params=params, headers=headers, timeout=60)
    except httpx.HTTPError as exc:
        raise UserError(f"--server {server}: cannot reach the audit API ({type(exc).__name__})") from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code != 200:
        detail = body.get("detail") if isinstance(body, dict) else None
        raise UserError(f"{server}: HTTP {response.status_code}: {detail or response.text[:200]}")
    if not isinstance(body, dict):
        raise UserError(f"{server}: unexpected answer (not a JSON object)")
    return body


def render_text(answer: dict[str, Any]) -> str:
    lines = [answer.get("summary", "")]
    reasons = answer.get("reasons") or {}
    if reasons:
        lines.append("")
        lines.append(f"{'reason':<28} {'devices':>8}")
        for code, n in reasons.items():
            lines.append(f"{code:<28} {n:>8}")
    for b in answer.get("blockers") or []:
        extra = ", ".join(f"{k}={v}" for k, v in b.items() if k != "code")
        lines.append(f"blocker: {b.get('code')}" + (f" ({extra})" if extra else ""))
    would_get = answer.get("would_get") or {}
    for b in would_get.get("blockers") or []:
        if b.get("reasons"):
            said = ", ".join(f"{k}={v}" for k, v in b["reasons"].items())
        elif b.get("code") == Blocker.INSUFFICIENT_ON_NODE.value and not b.get("fallback_mode"):
            said = "no device it asks for"
        else:  # a tier the policy closed (quota, fallback mode): what closed it
            said = ", ".join(f"{k}={v}" for k, v in b.items() if k not in ("code", "tier", "request"))
        lines.append(f"now: tier {b.get('tier')} {b.get('request', '')}: {b.get('code')} ({said})")
    for d in answer.get("devices") or []:
        detail = ", ".join(f"{k}={v}" for k, v in (d.get("detail") or {}).items())
        lines.append(f"  {d['device']:<48} {d.get('node', ''):<20} {d['reason']}" + (f"  {detail}" if detail else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    ns, name = _split_pod(args.pod)
    if not args.model.strip():
        raise UserError(f"--model {args.model!r}: empty; give a device model, e.g. --model H100")
    if args.policy and not args.dump:
        raise UserError("--policy applies to --dump only (the server uses the policy each decision recorded)")
    if args.dump and (args.server or args.token or args.cluster):
        raise UserError("--dump answers offline, from one cluster; it takes no --server, --token or --cluster")
    answer = _offline(args, ns, name) if args.dump else _online(args, ns, name)
    if args.output == "json":
        print(json.dumps(answer, indent=2, sort_keys=True))
    else:
        print(render_text(answer))
    return 0
