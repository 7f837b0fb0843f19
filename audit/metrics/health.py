"""Device health: how many devices were unhealthy and for how long — devices, not verdicts.

A device is unhealthy while an untolerated taint the policy marks as health
(``spec.health``) is on it, as the world fold sees it (slice taints and DeviceTaintRules). Counted
per distinct device and in device-hours clipped to the window; the per-attempt verdicts in the
decision records are evidence, not a count of devices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import UnhealthySpan
from audit.metrics.usage import HOUR_MS
from audit.metrics.window import Window

DEFINITIONS = (
    Definition("unhealthy_devices", "health", "device", "devices", "devices unhealthy at some moment of the window",
               "count of distinct devices", "audit.metrics.health.device_health"),
    Definition("unhealthy_device_hours", "health", "device × hour", "device-hours", "as unhealthy_devices",
               "Σ over unhealthy spans of their overlap with the window", "audit.metrics.health.device_health"),
)


@dataclass
class HealthStats:
    devices: set[str] = field(default_factory=set)
    device_hours: float = 0.0
    by_model: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def unhealthy_devices(self) -> int:
        return len(self.devices)


def device_health(spans: Iterable[UnhealthySpan], window: Window) -> HealthStats:
    s = HealthStats()
    per_model: dict[str, set[str]] = {}
    # integer milliseconds, converted once: the figure does not depend on the order spans come in
    total_ms = 0
    model_ms: dict[str, int] = {}
    for span in spans:
        ms = window.overlap_ms(span.start_ms, span.end_ms)
        if ms <= 0:
            continue
        s.devices.add(span.device)
        total_ms += ms
        per_model.setdefault(span.model, set()).add(span.device)
        model_ms[span.model] = model_ms.get(span.model, 0) + ms
    s.device_hours = total_ms / HOUR_MS
    s.by_model = {m: (len(per_model[m]), model_ms[m] / HOUR_MS) for m in sorted(per_model)}
    return s
