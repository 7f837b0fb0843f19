"""Which device model a device is, as the policy's device-model table says.

The table lives in the policy (``audit.policy``: ``spec.deviceModels``, defaulting to rules on
NVIDIA's ``productName``); without a policy the default policy's table is used. Devices no rule
names have no model here ("" rather than the policy's ``unknown``), so they are never counted
as a model a user asked about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.policy import UNKNOWN_MODEL, Policy, default_policy


@dataclass(frozen=True)
class ModelTable:
    policy: Policy

    @classmethod
    def of(cls, policy: Policy | None) -> ModelTable:
        return cls(policy if policy is not None else default_policy())

    def model_of(self, driver: str, attributes: Mapping[str, Any]) -> str:
        model = self.policy.model_of(driver, attributes)
        return "" if model == UNKNOWN_MODEL else model

    def known_models(self) -> set[str]:
        return {rule.model for rule in self.policy.model_rules if "\\" not in rule.model}
