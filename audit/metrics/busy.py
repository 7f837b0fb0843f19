"""Busy GPUs: how many devices pods held at each moment, and the window's peak share of the cluster.

A pod holds its devices from allocation to release (the same interval ``usage`` integrates), so the
busy count steps up by a pod's device count at its allocation and down at its release; a release
and an allocation at the same millisecond count the release first, since the freed device is what
the new pod takes. The share divides by the GPUs of the cluster: DRA devices on live nodes and the
device-plugin nodes' GPUs, as the world holds them when the figure is computed (trace-driven days
have no node losses, so that is their fleet throughout).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from audit.metrics.definition import Definition
from audit.metrics.lifecycle import PodLife
from audit.metrics.window import Window
from audit.world import World

DEFINITIONS = (
    Definition("peak_busy_devices", "busy", "device", "devices",
               "devices held by pods of both tracks at some moment of the window",
               "max over t in the window of Σ devices of the pods with allocation ≤ t < release",
               "audit.metrics.busy.peak_busy"),
    Definition("peak_busy_share", "busy", "device", "share of the cluster's GPUs",
               "as peak_busy_devices, over the GPUs on live nodes (DRA devices and device-plugin GPUs)",
               "peak_busy_devices / cluster_gpus", "audit.metrics.busy.peak_busy"),
)


@dataclass(frozen=True)
class Peak:
    devices: int
    at_ms: int  # the first moment the peak was reached (the window's start when nothing was held)


def busy_steps(pods: Iterable[PodLife], window: Window) -> list[tuple[int, int]]:
    """(ms, busy devices from then on) at every change inside the window, from its start."""
    deltas: dict[int, int] = {}
    for life in pods:
        if life.allocated_ms is None or not life.devices or window.overlap_ms(life.allocated_ms, life.released_ms) <= 0:
            continue
        start = max(life.allocated_ms, window.since_ms)
        deltas[start] = deltas.get(start, 0) + life.devices
        if life.released_ms is not None and life.released_ms < window.until_ms:
            deltas[life.released_ms] = deltas.get(life.released_ms, 0) - life.devices
    steps = [(window.since_ms, 0)]
    busy = 0
    for ms in sorted(deltas):
        busy += deltas[ms]
        if ms == steps[-1][0]:
            steps[-1] = (ms, busy)
        else:
            steps.append((ms, busy))
    return steps


def peak_busy(pods: Iterable[PodLife], window: Window) -> Peak:
    """The most devices held at once in the window, and when that was first reached."""
    best = Peak(0, window.since_ms)
    for ms, busy in busy_steps(pods, window):
        if busy > best.devices:
            best = Peak(busy, ms)
    return best


def cluster_gpus(world: World) -> int:
    """GPUs of the cluster as the world holds it: DRA devices on live nodes, device-plugin GPUs."""
    dra = sum(1 for d in world.devices.values() if not d.node or d.node in world.nodes)
    return dra + sum(g for node, g in world.dp_capacity.items() if node in world.nodes)
