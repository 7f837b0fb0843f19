"""``AuditStore`` provides every read its typed ports promise, with the same parameters, so code
written against ``audit.store.ports`` runs against the real store."""

from __future__ import annotations

import inspect

import pytest

from audit.store import ports
from audit.store.queries import AuditStore

PORTS = [ports.DecisionReads, ports.AggregateReads, ports.HistoryReads, ports.StoreReads]


def _methods(protocol: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in inspect.getmembers(protocol, inspect.isfunction)
            if not name.startswith("_")}


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.__name__)
def test_the_store_has_each_method_of_the_port_with_its_parameters(port: type) -> None:
    promised = _methods(port)
    assert promised, port.__name__
    for name, signature in promised.items():
        real = inspect.signature(getattr(AuditStore, name))
        # the store may take more optional parameters (batch sizes); never fewer or other names
        assert list(signature.parameters)[: len(signature.parameters)] == list(real.parameters)[: len(signature.parameters)], name


def test_the_read_port_is_the_union_of_the_resource_ports() -> None:
    union = set().union(*(_methods(p) for p in PORTS[:3]))
    assert set(_methods(ports.StoreReads)) == union
