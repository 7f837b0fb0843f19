"""Which device model a device is, as the policy's device-model table says.

The table lives in the policy (``audit.policy``: ``spec.deviceModels``, defaulting to rules on
NVIDIA's ``productName``); without a policy the default policy's table is used. Devices no rule
names have no model here ("" rather than the policy's ``unknown``), so they are never counted
as a model a user asked about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.policy import UNKNOWN_MODEL, Policy, attribute_text, default_policy


@dataclass(frozen=True)
class ModelTable:
    policy: Policy
    # A rule reads nothing but its driver and the text of its attribute, so devices alike in
    # those (every GPU of one product) share one answer; a cluster has few such shapes.
    _answers: dict[tuple[str, tuple[str | None, ...]], str] = field(default_factory=dict, compare=False, repr=False)
    _read: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, policy: Policy | None) -> ModelTable:
        return cls(policy if policy is not None else default_policy())

    def model_of(self, driver: str, attributes: Mapping[str, Any]) -> str:
        names = self._read.get(driver)
        if names is None:
            names = self._read[driver] = tuple(sorted({r.attribute for r in self.policy.model_rules if r.driver == driver}))
        if len(names) == 1:  # the usual table: every rule of the driver reads productName
            key: tuple[str, tuple[str | None, ...]] = (driver, (attribute_text(driver, attributes, names[0]),))
        else:
            key = (driver, tuple(attribute_text(driver, attributes, name) for name in names))
        found = self._answers.get(key)
        if found is None:
            model = self.policy.model_of(driver, attributes)
            found = self._answers[key] = "" if model == UNKNOWN_MODEL else model
        return found

    def known_models(self) -> set[str]:
        """The models the table names itself; those of its rules that take the model from the
        attribute's text (``expands``) are known only from the devices they read."""
        return {rule.model for rule in self.policy.model_rules if "\\" not in rule.model}

    @property
    def expands(self) -> bool:
        """Whether a rule names the model with a group reference of its match (``\\1``)."""
        return any("\\" in rule.model for rule in self.policy.model_rules)


class UnknownModel(ValueError):
    """A device model nothing the answer reads names; the message says which models are known."""


def check_model(model: str, known: Iterable[str], name: str, knower: str) -> str:
    """``model`` when ``known`` has it, else ``UnknownModel`` naming ``name`` (the parameter or flag).

    Model names are matched exactly, as the device-model table produces them, so ``h100`` would
    silently explain a model no device has; a model that differs from a known one only in case
    or surrounding spaces is refused with that one suggested."""
    names = set(known)
    if model in names:
        return model
    meant = sorted(k for k in names if k.casefold() == model.strip().casefold())
    hint = f"; did you mean {meant[0]}?" if meant else f" (known: {', '.join(sorted(names)) or 'none'})"
    raise UnknownModel(f"{name} {model!r}: not a device model {knower} knows{hint}")
