"""Every record is reproduced by re-running the engine on the world rebuilt from the event log."""

from audit.scheduler.engine import bind, bind_failures_before, decide
from audit.timestamps import parse_time_ms
from audit.world import World
from tests.simulate.runs import cluster_day


def test_every_decision_replays_from_the_event_log_to_the_same_digest():
    result = cluster_day(5, 5.0)
    pending = sorted(result.records, key=lambda r: r.seq)
    world = World(result.world.cluster)
    events = iter(result.events)
    replayed = 0
    i = 0
    while i < len(pending):
        r = pending[i]
        while world.seq < r.seq:
            world.apply(next(events))
        d = decide(world, f"{r.namespace}/{r.pod}", r.attempt, parse_time_ms(r.time))
        bind_seq = next((b.detail["bind_seq"] for b in r.blockers if "bind_seq" in b.detail), None)
        if bind_seq is not None:
            # the bind-time check ran later, after the interfering events: replay it there
            later = World.from_snapshot(world.snapshot())
            for ev in result.events[world.seq + 1:bind_seq + 1]:
                later.apply(ev)
            d = bind(later, d, parse_time_ms(r.time), failures_before=bind_failures_before(r))
        assert d.record.output_digest == r.output_digest, r.decision_id
        assert d.record.input_digest == r.input_digest
        replayed += 1
        i += 1
    assert replayed == len(result.records)
