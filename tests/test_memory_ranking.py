"""The startup ranking kept as facts change: it chooses what a fresh sort of
every fact and a walk in rank order (skipping what does not fit) would."""

from __future__ import annotations

import random

from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity
from enact.memory.ranking import StartupRanking, line_length, may_start, rank_item


def _fact(rng: random.Random, fact_id: str) -> Fact:
    return Fact(
        id=fact_id, text="x" * rng.randint(1, 120), type=FactType.FACT, scope=Scope.USER, subject="",
        confidence=rng.choice(list(Confidence)), sensitivity=rng.choice(list(Sensitivity)), tags=(), refs=(),
        origin="human-cli", state=rng.choice([FactState.ACTIVE, FactState.ACTIVE, FactState.PENDING]),
        created_at=0.0, updated_at=float(rng.randint(0, 50)),
    )


def _walk(facts: list[Fact], budget: int, *, send_private: bool) -> list[str]:
    """The rule as written: every fact sorted, each taken if it still fits."""
    chosen = []
    for fact in sorted((f for f in facts if may_start(f)), key=rank_item):
        if fact.sensitivity is Sensitivity.PRIVATE and not send_private:
            continue
        if line_length(fact) <= budget:
            chosen.append(fact.id)
            budget -= line_length(fact)
    return chosen


def test_the_kept_ranking_chooses_what_a_sort_and_walk_would_through_writes_and_removals() -> None:
    rng = random.Random(8)
    ranking = StartupRanking()
    facts: dict[str, Fact] = {}
    for step in range(600):
        if facts and rng.random() < 0.25:
            gone = rng.choice(sorted(facts))
            del facts[gone]
            ranking.remove(gone)
        else:  # a new fact, or a rewrite of one (merged, confirmed: its rank or state moves)
            fact_id = rng.choice(sorted(facts)) if facts and rng.random() < 0.3 else f"f-{step:04}"
            facts[fact_id] = _fact(rng, fact_id)
            ranking.add(facts[fact_id])
        if step % 20 == 0:
            for budget in (0, 60, 700, 5000):
                for send_private in (False, True):
                    chosen, _ = ranking.select(budget, send_private=send_private)
                    assert [f.id for f in chosen] == _walk(list(facts.values()), budget, send_private=send_private)
    assert len(ranking) == sum(1 for fact in facts.values() if may_start(fact))


def test_a_ranking_made_at_once_equals_one_kept_fact_by_fact() -> None:
    rng = random.Random(3)
    facts = [_fact(rng, f"f-{n:04}") for n in range(300)]
    kept = StartupRanking()
    for fact in facts:
        kept.add(fact)
    assert kept.select(3000, send_private=True) == StartupRanking(facts).select(3000, send_private=True)


def test_secret_and_pending_facts_are_not_ranked() -> None:
    rng = random.Random(1)
    base = _fact(rng, "f-1")
    ranking = StartupRanking([
        Fact(**{**_fields(base), "id": "secret", "sensitivity": Sensitivity.SECRET, "state": FactState.ACTIVE}),
        Fact(**{**_fields(base), "id": "pending", "sensitivity": Sensitivity.NORMAL, "state": FactState.PENDING}),
    ])
    assert len(ranking) == 0 and ranking.select(10_000, send_private=True) == ([], 10_000)


def _fields(fact: Fact) -> dict[str, object]:
    return {name: getattr(fact, name) for name in Fact.__dataclass_fields__}
