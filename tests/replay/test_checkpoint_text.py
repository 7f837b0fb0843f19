"""Checkpoints read as stored text: verified byte-wise, refused when damaged, rebuilt every load."""

from __future__ import annotations

import copy
import functools
import hashlib
import json

import pytest

from audit.canonical import digest
from audit.replay import CheckpointCorrupt, MemorySource, checkpoint_body, load_checkpoint
from audit.replay.checkpoints import checkpoint_text, forget_parsed_checkpoints, load_checkpoint_text
from audit.world import World
from tests.metrics.foldstate import fold_state
from tests.replay.runs import busy

HOURS = 2.0
SEQ = 1499  # the checkpoint position these tests load (after the first 1,500 events)


@functools.lru_cache(maxsize=1)
def _folded() -> World:
    return _folded_to(SEQ)


def _folded_to(seq: int) -> World:
    world = World("busy")
    for ev in busy(HOURS).events[: seq + 1]:
        world.apply(ev)
    return world


def _text() -> str:
    return checkpoint_text(checkpoint_body(_folded()))


def _indexes(world: World) -> dict[str, object]:
    """What the engine reads besides the objects, in comparable form (a folded world keeps empty
    lists and zero counters where a rebuilt one has none: both read the same)."""
    return {
        "snapshot": world.snapshot(), "chain": world.chain_digest, "node_model": world.node_model,
        "free_nodes": {m: {k: v for k, v in by_k.items() if v} for m, by_k in world.free_nodes.items()},
        "allocated_by": world.allocated_by, "pending": world.pending, "multi_model_nodes": world.multi_model_nodes,
        "devices": {i: (d.node, d.model, d.signature, d.taints, d.unhealthy) for i, d in world.devices.items()},
        "signatures": {k: (v[0], v[1]) for k, v in world.signatures.items()},
        **{c: {k: v for k, v in getattr(world, c).items() if v}
           for c in ("model_allocated", "model_free", "model_totals", "pending_by_tenant", "dp_used")},
    }


@pytest.mark.parametrize("kept", [False, True], ids=["first-load", "parse-kept-from-an-earlier-load"])
def test_a_checkpoint_text_rebuilds_the_world_the_body_and_the_fold_hold(kept):
    forget_parsed_checkpoints()
    text = _text()
    if kept:
        load_checkpoint_text("busy", SEQ, text)
    loaded = load_checkpoint_text("busy", SEQ, text)
    assert _indexes(loaded) == _indexes(_folded())
    assert _indexes(loaded) == _indexes(load_checkpoint("busy", SEQ, json.loads(text)))


def _node() -> str:
    """An A100 node that is up at the checkpoint (which one depends on the run's disruptions)."""
    return sorted(n for n in _folded().objects["Node"] if n.startswith("a100-"))[0]


def _flip_node_name(text: str) -> str:
    """One character of one object changed (a node renamed in its own object)."""
    name = f'"name":"{_node()}"'
    i = text.index(name)
    return text[:i] + name[:-2] + 'X"' + text[i + len(name):]


def _new_digest(text: str) -> str:
    body = json.loads(text)
    return text.replace(body["content_digest"], "0" * 64)


def _without_digest(text: str) -> str:
    body = json.loads(text)
    return text.replace(f',"content_digest":"{body["content_digest"]}"', "")


@pytest.mark.parametrize(("damage", "message"), [
    (_flip_node_name, "content_digest: recorded {digest}, content hashes to "),
    (_new_digest, "content_digest: recorded " + "0" * 64 + ", content hashes to {digest}"),
    (_without_digest, "content_digest missing"),
    (lambda t: t[:-200], "body is not JSON: "),
    (lambda t: json.dumps(json.loads(t)["objects"]), "content_digest missing"),
    (lambda t: f"[{t}]", "body is list, not an object"),
], ids=["object-edited", "digest-edited", "digest-removed", "truncated", "objects-only", "not-an-object"])
def test_a_damaged_checkpoint_text_is_refused_naming_cluster_seq_and_content_digest(damage, message):
    text = _text()
    recorded = json.loads(text)["content_digest"]
    load_checkpoint_text("busy", SEQ, text)  # the good text's parse is kept: damage must still be caught
    with pytest.raises(CheckpointCorrupt) as exc:
        load_checkpoint_text("busy", SEQ, damage(text))
    expected = f"checkpoint busy@{SEQ}: " + message.format(digest=recorded)
    assert str(exc.value).startswith(expected), str(exc.value)
    assert (exc.value.cluster, exc.value.seq) == ("busy", SEQ)


def test_a_text_for_another_position_is_refused_even_when_its_bytes_verify():
    with pytest.raises(CheckpointCorrupt) as exc:
        load_checkpoint_text("busy", SEQ + 1, _text())
    assert str(exc.value) == f"checkpoint busy@{SEQ + 1}: body is for busy@{SEQ}"


def _with_accented_label() -> dict:
    """The checkpoint body with a non-ASCII node label, digested as the writer would."""
    body = copy.deepcopy(checkpoint_body(_folded()))
    node = body["objects"]["Node"][_node()]
    node["metadata"]["labels"] = {**node["metadata"].get("labels", {}), "site": "Zürich-Créteil"}
    snap = {k: v for k, v in body.items() if k != "content_digest"}
    body["content_digest"] = digest(snap)
    return body


def test_an_older_writers_ascii_escaped_text_is_checked_on_its_content_and_accepted():
    body = _with_accented_label()
    escaped = json.dumps(body, sort_keys=True, separators=(",", ":"))  # ensure_ascii: "\u00fc"
    assert "Zürich" not in escaped and checkpoint_text(body) != escaped
    loaded = load_checkpoint_text("busy", SEQ, escaped)
    assert loaded.get("Node", "", _node())["metadata"]["labels"]["site"] == "Zürich-Créteil"
    assert _indexes(loaded) == _indexes(load_checkpoint_text("busy", SEQ, checkpoint_text(body)))
    damaged = escaped.replace("Z\\u00fcrich", "Z\\u00fcric_")
    with pytest.raises(CheckpointCorrupt, match=rf"^checkpoint busy@{SEQ}: content_digest: recorded "):
        load_checkpoint_text("busy", SEQ, damaged)


def test_worlds_rebuilt_from_one_kept_parse_are_independent():
    text = _text()
    first = load_checkpoint_text("busy", SEQ, text)
    second = load_checkpoint_text("busy", SEQ, text)
    assert first is not second and first.devices is not second.devices
    for ev in busy(HOURS).events[SEQ + 1: SEQ + 400]:
        first.apply(ev)
    assert first.snapshot() != second.snapshot()
    assert _indexes(second) == _indexes(_folded())
    assert _indexes(load_checkpoint_text("busy", SEQ, text)) == _indexes(_folded())


def test_memory_source_keeps_checkpoints_as_the_canonical_text_the_store_keeps():
    source = MemorySource(busy(HOURS).events[: SEQ + 1])
    assert source.add_checkpoints(500) == 3
    seq, text = source.nearest_checkpoint_text("busy", SEQ)
    assert seq == SEQ and text == _text()
    assert source.nearest_checkpoint("busy", SEQ) == (SEQ, json.loads(text))
    assert hashlib.sha256(text.replace(f',"content_digest":"{json.loads(text)["content_digest"]}"', "").encode()
                          ).hexdigest() == json.loads(text)["content_digest"]


def test_a_load_of_kept_content_is_a_world_of_its_own_equal_to_a_rebuild():
    forget_parsed_checkpoints()
    text = _text()
    first = load_checkpoint_text("busy", SEQ, text)
    again = load_checkpoint_text("busy", SEQ, text)
    rebuilt = load_checkpoint("busy", SEQ, json.loads(text))
    assert fold_state(again) == fold_state(first) == fold_state(rebuilt)
    for name in ("objects", "devices", "node_devices", "node_model", "free_nodes", "allocated_by", "claim_devices",
                 "usage", "pending", "pending_order", "signatures", "node_versions"):
        assert getattr(again, name) is not getattr(first, name), name
    for ev in busy(HOURS).events[SEQ + 1: SEQ + 400]:  # allocations, releases, a slice and a taint rule changed
        again.apply(ev)
    assert _indexes(again) == _indexes(_folded_to(SEQ + 399))
    assert fold_state(load_checkpoint_text("busy", SEQ, text)) == fold_state(rebuilt)
