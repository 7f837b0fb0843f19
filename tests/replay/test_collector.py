"""Rebuilding a world holds off garbage collection, then leaves its objects out of the young
generations without walking them; nothing stays frozen and cyclic garbage is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from audit.replay.checkpoints import collector_paused


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _build(n: int) -> list[dict[str, list[int]]]:
    return [{"x": [i]} for i in range(n)]


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()  # whatever an earlier test in this process froze is its own business, not ours
    gc.collect()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_a_large_rebuild_leaves_the_young_generation_empty_and_nothing_frozen(collector):
    with collector_paused():
        assert not gc.isenabled()
        kept = _build(30_000)
    assert gc.isenabled()
    assert gc.get_count()[0] < 1_000  # the 60,000 containers built are no longer young
    assert gc.get_freeze_count() == 0
    assert len(kept) == 30_000


def test_cyclic_garbage_built_during_a_rebuild_is_still_collected(collector):
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        _build(30_000)
        alive = weakref.ref(a)
    del a, b
    assert alive() is not None  # only a cycle keeps it: reference counting cannot free it
    gc.collect()
    assert alive() is None


def test_a_small_fold_resumes_collection_as_usual(collector):
    gc.collect()  # an empty young generation: the 200 containers below stay under its threshold
    with collector_paused():
        kept = _build(100)
    assert gc.isenabled()
    assert gc.get_count()[0] >= 200  # left young: too few to be worth moving
    assert len(kept) == 100


def test_objects_someone_else_froze_stay_frozen(collector):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            kept = _build(30_000)
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen
        assert len(kept) == 30_000
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("enabled", [True, False], ids=["was-enabled", "was-disabled"])
def test_the_collector_is_left_as_it_was_even_when_the_rebuild_fails(collector, enabled):
    (gc.enable if enabled else gc.disable)()
    with pytest.raises(RuntimeError), collector_paused():
        _build(30_000)
        raise RuntimeError("rebuild failed")
    assert gc.isenabled() is enabled
    with collector_paused():
        pass
    assert gc.isenabled() is enabled
