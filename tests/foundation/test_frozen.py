"""``audit.frozen.fast_init`` makes the instance the dataclass's own ``__init__`` makes, or refuses.

Each class given a cheaper ``__init__`` is compared with a twin made by ``dataclasses`` alone
(``make_dataclass`` over the same fields): same ``__dict__`` in the same order, equality, hash,
``repr`` and orjson bytes, the same errors for bad calls, and no mutation afterwards.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from audit.allocator.outcome import DeviceVerdict
from audit.dra.model import AttributeValue, Device, DeviceCapacity, Metadata, ResourceClaim
from audit.frozen import fast_init
from audit.scheduler.quota import QuotaCheck
from audit.scheduler.tiers import RequestTiers, Tier


def _twin(cls: type) -> type:
    """The same frozen dataclass, with the ``__init__`` dataclasses generates."""
    fields = [(f.name, f.type, field(default=f.default) if f.default is not dataclasses.MISSING
               else field(default_factory=f.default_factory) if f.default_factory is not dataclasses.MISSING
               else field()) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=True)


def _hash(value: object) -> int | str:
    try:
        return hash(value)
    except TypeError:  # a frozen dataclass holding a dict (Metadata's labels)
        return "unhashable"


_TIER = Tier("ns/c", "gpu", "h100", 0, 1, False, "gpu.nvidia.com", ("sel",), False, ("H100",))

# (class, positional arguments, keyword arguments): defaults left out, given, and by keyword
CASES: list[tuple[type, tuple[Any, ...], dict[str, Any]]] = [
    (AttributeValue, ("string", "NVIDIA H100"), {}),
    (DeviceVerdict, ("d/p/gpu-0", "selected"), {}),
    (DeviceVerdict, ("d/p/gpu-0", "taint"), {"detail": (("key", "health"),)}),
    (QuotaCheck, (True, "H100", 3, 1), {}),
    (QuotaCheck, (False, "H100", 40, 4, 24, 40, 0), {}),
    (Tier, ("ns/c", "gpu", "", 0, 2, False, "gpu.nvidia.com", (), False), {}),
    (Tier, ("ns/c", "gpu", "a100", 1, 1, False, "gpu.nvidia.com", ("s",), True), {"models": ("A100",)}),
    (RequestTiers, ("ns/c", "gpu", True, (_TIER,)), {}),
    (Metadata, (), {"name": "claim-1", "namespace": "ns"}),
    (Metadata, ("claim-1", "ns", "uid-1", {"a": "b"}), {"creation_timestamp": "2026-11-02T00:00:00Z"}),
    (DeviceCapacity, (), {"value": "80Gi"}),
]


@pytest.mark.parametrize("cls, args, kwargs", CASES, ids=lambda v: getattr(v, "__name__", None) or "")
def test_fast_init_makes_the_instance_the_dataclass_init_makes(cls: type, args: tuple[Any, ...],
                                                                kwargs: dict[str, Any]) -> None:
    ours, theirs = cls(*args, **kwargs), _twin(cls)(*args, **kwargs)
    assert list(vars(ours).items()) == list(vars(theirs).items())
    assert ours == cls(*args, **kwargs) and ours == dataclasses.replace(ours)
    assert _hash(ours) == _hash(cls(*args, **kwargs))
    assert repr(ours).split("(", 1)[1] == repr(theirs).split("(", 1)[1]
    assert orjson.dumps(ours) == orjson.dumps(theirs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.__setattr__(dataclasses.fields(cls)[0].name, None)


def test_the_classes_made_in_bulk_have_the_cheaper_init() -> None:
    for cls in (AttributeValue, DeviceVerdict, QuotaCheck, Tier, RequestTiers, Metadata, DeviceCapacity,
                Device, ResourceClaim):
        assert cls.__init__.__module__ == cls.__module__ and "__fields" in cls.__init__.__code__.co_varnames


def test_a_default_factory_makes_a_fresh_value_per_instance() -> None:
    a, b = Metadata(name="a"), Metadata(name="b")
    assert a.labels == {} and a.labels is not b.labels


@pytest.mark.parametrize("call, message", [
    (lambda: QuotaCheck(True, "H100"), "missing 2 required positional arguments: 'used' and 'requested'"),
    (lambda: DeviceVerdict("d", "r", (), "extra"), "takes from 3 to 4 positional arguments but 5 were given"),
    (lambda: DeviceVerdict("d", "r", colour="red"), "got an unexpected keyword argument 'colour'"),
    (lambda: DeviceVerdict("d", "r", device="e"), "got multiple values for argument 'device'"),
], ids=["missing", "too-many", "unknown-keyword", "twice"])
def test_bad_calls_fail_as_they_would_without_it(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()


@dataclass(frozen=True)
class _WithPostInit:
    x: int

    def __post_init__(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Slotted:
    x: int


@dataclass(frozen=True)
class _KeywordOnly:
    x: int = field(kw_only=True)


@dataclass(frozen=True)
class _NotInit:
    x: int = field(default=0, init=False)


@dataclass(frozen=True)
class _InitOnly:
    x: int
    scale: dataclasses.InitVar[int] = 1


@dataclass
class _Mutable:
    x: int


@pytest.mark.parametrize("cls", [_WithPostInit, _Slotted, _KeywordOnly, _NotInit, _InitOnly, _Mutable, int],
                         ids=lambda c: c.__name__)
def test_classes_it_cannot_serve_exactly_are_refused(cls: type) -> None:
    with pytest.raises(TypeError, match=f"fast_init: {cls.__name__}[ .]"):
        fast_init(cls)
