"""Busy GPUs over time and the window's peak, on hand-made pod rows."""

import pytest

from audit.metrics.busy import Peak, busy_steps, peak_busy
from audit.metrics.lifecycle import PodLife
from audit.metrics.window import Window


def _pod(name, allocated, released, devices):
    return PodLife("c", "t", name, name, "t", "dra", created_ms=0, allocated_ms=allocated,
                   released_ms=released, devices=devices)


@pytest.mark.parametrize(("pods", "steps", "peak"), [
    pytest.param([], [(100, 0)], Peak(0, 100), id="nothing-held"),
    pytest.param([_pod("a", 110, 150, 2), _pod("b", 120, None, 4)],
                 [(100, 0), (110, 2), (120, 6), (150, 4)], Peak(6, 120), id="overlap-adds"),
    # b takes at 150 the devices a frees at 150: never 2 + 3 at once
    pytest.param([_pod("a", 110, 150, 2), _pod("b", 150, 180, 3)],
                 [(100, 0), (110, 2), (150, 3), (180, 0)], Peak(3, 150), id="release-before-allocation"),
    # held from before the window: counted from its start; released after it: no step down
    pytest.param([_pod("a", 50, 250, 8)], [(100, 8)], Peak(8, 100), id="clipped-to-the-window"),
    pytest.param([_pod("a", 10, 90, 8), _pod("b", 200, 300, 8), _pod("c", None, None, 0)],
                 [(100, 0)], Peak(0, 100), id="outside-or-never-allocated"),
    pytest.param([_pod("a", 110, 120, 4), _pod("b", 130, 140, 4)],
                 [(100, 0), (110, 4), (120, 0), (130, 4), (140, 0)], Peak(4, 110), id="first-moment-of-the-peak"),
])
def test_busy_devices_step_at_allocation_and_release(pods, steps, peak):
    window = Window(100, 200)
    assert busy_steps(pods, window) == steps
    assert peak_busy(pods, window) == peak
