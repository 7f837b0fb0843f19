"""Every record is reproduced by re-running the engine on the world rebuilt from the event log."""

from tests.simulate.runs import cluster_day, replay_every_decision


def test_every_decision_replays_from_the_event_log_to_the_same_digest():
    result = cluster_day(5, 5.0)
    assert replay_every_decision(result) == len(result.records)
