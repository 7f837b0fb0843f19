"""What the export bench's engine pairs run (``benchmarks.bench_otel``): each round of each engine
process a seed no other round and not the warm-up takes, so the exporter never meets decisions it
exported before, and within a round the bare and the exporting run on the same seed, in
alternating order; pairs are matched by seed and must make the same decisions."""

from __future__ import annotations

import pytest

from benchmarks.bench_otel import (
    CONTEXT_RUNS,
    ENGINE_PROCESSES,
    ENGINE_ROUNDS,
    PAIR_VARIANTS,
    WARM_UP_SEED,
    EngineRun,
    engine_plan,
    paired,
)


@pytest.mark.parametrize(("process", "variants", "rounds", "plan"), [
    pytest.param(0, ("bare", "direct"), 3, [("bare", 2), ("direct", 2), ("direct", 3), ("bare", 3), ("bare", 4), ("direct", 4)],
                 id="first-process-pairs-alternate-after-the-warm-up-seed"),
    pytest.param(1, ("bare", "direct"), 2, [("bare", 12), ("direct", 12), ("direct", 13), ("bare", 13)],
                 id="next-process-starts-past-the-first-ones-rounds"),
    pytest.param(4, ("child",), 2, [("child", 42), ("child", 43)], id="context-process-one-run-per-seed"),
])
def test_engine_plan_gives_each_round_its_seed(process: int, variants: tuple[str, ...], rounds: int,
                                               plan: list[tuple[str, int]]) -> None:
    assert engine_plan(process, variants, rounds) == plan


def test_no_two_rounds_of_a_run_and_no_round_and_the_warm_up_share_a_seed() -> None:
    plans = [engine_plan(p, PAIR_VARIANTS, ENGINE_ROUNDS) for p in range(ENGINE_PROCESSES)]
    plans += [engine_plan(ENGINE_PROCESSES, ("child",), CONTEXT_RUNS),
              engine_plan(ENGINE_PROCESSES + 1, ("sdk",), CONTEXT_RUNS)]
    seeds = [seed for plan in plans for seed in sorted({seed for _, seed in plan})]
    assert len(seeds) == ENGINE_PROCESSES * ENGINE_ROUNDS + 2 * CONTEXT_RUNS == len(set(seeds))
    assert WARM_UP_SEED not in seeds
    for plan in plans[:ENGINE_PROCESSES]:  # a pair: bare and exporting back to back on one seed
        assert [sorted(plan[i:i + 2]) for i in range(0, len(plan), 2)] == [
            [("bare", seed), ("direct", seed)] for seed in sorted({seed for _, seed in plan})]


@pytest.mark.parametrize("rounds", [0, ENGINE_ROUNDS + 1])
def test_engine_plan_refuses_rounds_that_would_reach_another_process_seeds(rounds: int) -> None:
    with pytest.raises(ValueError, match=f"rounds: 1 to {ENGINE_ROUNDS}, got {rounds}"):
        engine_plan(0, PAIR_VARIANTS, rounds)


def _run(variant: str, seed: int, decisions: int = 1000) -> EngineRun:
    return EngineRun(variant, seed, 0.5, 0.6, decisions)


@pytest.mark.parametrize(("runs", "pairs", "error"), [
    pytest.param([_run("bare", 2), _run("direct", 2), _run("child", 42), _run("direct", 3), _run("bare", 3)],
                 [(2, 2), (3, 3)], "", id="matched-by-seed-whatever-the-order"),
    pytest.param([_run("bare", 2), _run("direct", 2, 999)], [], "seed 2: the bare run made 1000 decisions, the "
                 "exporting one 999", id="different-decisions-on-one-seed"),
    pytest.param([_run("bare", 2), _run("direct", 3)], [], r"seed 2: runs \['bare'\], not a bare and an exporting one",
                 id="a-seed-without-its-partner"),
])
def test_paired_matches_bare_and_exporting_runs_of_one_seed(runs: list[EngineRun], pairs: list[tuple[int, int]],
                                                            error: str) -> None:
    if error:
        with pytest.raises(RuntimeError, match=error):
            paired(runs)
    else:
        assert [(bare.seed, direct.seed) for bare, direct in paired(runs)] == pairs
        assert all((bare.variant, direct.variant) == PAIR_VARIANTS for bare, direct in paired(runs))
