"""An independent, deliberately simple checker of allocation results, for property tests.

It reads the raw API dicts (not the allocator's model or inventory) and checks a proposed
assignment against the rules: the device exists on the node, is not taken, matches every class
and request selector, tolerates every NoSchedule/NoExecute taint, and the claim constraints hold.
``brute_force`` enumerates every assignment of small problems to tell whether any solution
exists at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from audit.dra.cel import CelEnvironment, device_context

_ENV = CelEnvironment()


class Problem:
    def __init__(self, objects: list[dict[str, Any]], node: str) -> None:
        self.classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "DeviceClass"}
        self.devices: dict[str, tuple[str, dict[str, Any]]] = {}  # id -> (driver, device)
        for o in objects:
            if o["kind"] == "ResourceSlice" and o["spec"].get("nodeName") == node:
                spec = o["spec"]
                for dev in spec.get("devices", []):
                    self.devices[f"{spec['driver']}/{spec['pool']['name']}/{dev['name']}"] = (spec["driver"], dev)
        self.taken: set[str] = set()
        self.pending: list[dict[str, Any]] = []
        for o in objects:
            if o["kind"] != "ResourceClaim":
                continue
            alloc = o.get("status", {}).get("allocation")
            if alloc:
                for r in alloc["devices"]["results"]:
                    self.taken.add(f"{r['driver']}/{r['pool']}/{r['device']}")
            else:
                self.pending.append(o)

    def selectable(self, device_id: str, spec: dict[str, Any]) -> bool:
        driver, dev = self.devices[device_id]
        ctx = device_context(driver, dev.get("attributes", {}), dev.get("capacity", {}), False)
        selectors = self.classes[spec["deviceClassName"]]["spec"].get("selectors", []) + spec.get("selectors", [])
        if not all(_ENV.compile(s["cel"]["expression"]).evaluate(ctx) for s in selectors):
            return False
        for taint in dev.get("taints", []):
            if taint["effect"] in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in spec.get("tolerations", [])
            ):
                return False
        return True

    def constraints_hold(self, claim: dict[str, Any], picks: list[tuple[str, str, str]]) -> bool:
        """picks: (base request, full request name, device id)."""
        for c in claim["spec"]["devices"].get("constraints", []):
            names = set(c.get("requests", []))
            covered = [d for base, full, d in picks if not names or base in names or full in names]
            attr = c.get("matchAttribute") or c.get("distinctAttribute")
            values = [self._attr(d, attr) for d in covered]
            if any(v is None for v in values):
                return False
            if "matchAttribute" in c and len(set(values)) > 1:
                return False
            if "distinctAttribute" in c and len(set(values)) != len(values):
                return False
        return True

    def _attr(self, device_id: str, name: str) -> Any:
        driver, dev = self.devices[device_id]
        attrs = dev.get("attributes", {})
        domain, _, ident = name.partition("/")
        value = attrs.get(name) or (attrs.get(ident) if domain == driver else None)
        return None if value is None else tuple(sorted(value.items()))

    def check(self, allocations: list[dict[str, Any]]) -> list[str]:
        """Problems with a proposed solution (empty when it satisfies every rule)."""
        problems: list[str] = []
        used: set[str] = set(self.taken)
        for claim, alloc in zip(self.pending, allocations, strict=True):
            picks = []
            requests = {r["name"]: r for r in claim["spec"]["devices"]["requests"]}
            for res in alloc["results"]:
                dev_id = f"{res['driver']}/{res['pool']}/{res['device']}"
                base, _, sub_name = res["request"].partition("/")
                req = requests[base]
                spec = req["exactly"] if not sub_name else next(s for s in req["firstAvailable"] if s["name"] == sub_name)
                if dev_id not in self.devices:
                    problems.append(f"{dev_id} is not on the node")
                    continue
                if dev_id in used:
                    problems.append(f"{dev_id} handed out twice")
                used.add(dev_id)
                if not self.selectable(dev_id, spec):
                    problems.append(f"{dev_id} does not match {res['request']}")
                picks.append((base, res["request"], dev_id))
            for base, req in requests.items():
                got = [p for p in picks if p[0] == base]
                subs = {p[1] for p in got}
                if len(subs) != 1:
                    problems.append(f"request {base} satisfied by {sorted(subs)}")
                    continue
                full = subs.pop()
                spec = req["exactly"] if full == base else next(s for s in req["firstAvailable"] if f"{base}/{s['name']}" == full)
                if len(got) != spec.get("count", 1):
                    problems.append(f"request {full} got {len(got)} devices")
            if not self.constraints_hold(claim, picks):
                problems.append(f"claim {claim['metadata']['name']} violates a constraint")
        return problems

    def brute_force(self) -> bool:
        """Whether any assignment satisfies every rule (exponential: small problems only)."""
        options = []
        for claim in self.pending:
            per_request = []
            for req in claim["spec"]["devices"]["requests"]:
                alts = []
                specs = [(req["name"], req["exactly"])] if "exactly" in req else [
                    (f"{req['name']}/{s['name']}", s) for s in req["firstAvailable"]]
                for full, spec in specs:
                    fitting = [d for d in self.devices if d not in self.taken and self.selectable(d, spec)]
                    for combo in itertools.combinations(fitting, spec.get("count", 1)):
                        alts.append([(req["name"], full, d) for d in combo])
                per_request.append(alts)
            options.append(per_request)
        return any(True for _ in self._solutions(options))

    def _solutions(self, options: list[list[list[list[tuple[str, str, str]]]]]) -> Iterator[None]:
        for choice in itertools.product(*(itertools.product(*per_request) for per_request in options)):
            devices = [d for claim_choice in choice for req_choice in claim_choice for _, _, d in req_choice]
            if len(devices) != len(set(devices)):
                continue
            if all(self.constraints_hold(claim, [p for req_choice in claim_choice for p in req_choice])
                   for claim, claim_choice in zip(self.pending, choice, strict=True)):
                yield None
                return


def _tolerates(tol: dict[str, Any], taint: dict[str, Any]) -> bool:
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    if tol.get("key") and tol["key"] != taint.get("key"):
        return False
    op = tol.get("operator", "Equal")
    return op == "Exists" or (op == "Equal" and tol.get("value", "") == taint.get("value", ""))
