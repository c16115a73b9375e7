"""Startup context and recall selection, rule by rule (plain functions, no threads)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fact_books import FactBooks

from enact.memory.briefing import Briefing
from enact.memory.context import (
    PREAMBLE,
    RECALL_CANDIDATES_PER_SLOT,
    RECALL_HEADING,
    STARTUP_HEADING,
    ContextSettings,
    Decision,
    fact_line,
    select_recall,
    select_startup,
)
from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity
from enact.memory.identity import PrivateIdentity
from enact.memory.ranking import line_length

SETTINGS = ContextSettings()


def fact(fact_id: str, text: str = "", *, confidence: Confidence = Confidence.HIGH, updated_at: float = 1.0,
         sensitivity: Sensitivity = Sensitivity.NORMAL, state: FactState = FactState.ACTIVE) -> Fact:
    return Fact(
        id=fact_id, text=text or f"fact {fact_id}", type=FactType.FACT, scope=Scope.USER, subject="",
        confidence=confidence, sensitivity=sensitivity, tags=(), refs=(), origin="human-cli", state=state,
        created_at=0.0, updated_at=updated_at,
    )


def startup(facts: list[Fact], **overrides: object) -> tuple[str, list[str], dict[str, Decision]]:
    settings = dataclasses.replace(SETTINGS, **overrides)  # type: ignore[arg-type]
    chosen = select_startup(facts, body_identity="body", private_identity="", settings=settings)
    order = [line.split("; ")[-1].rstrip(")") for line in chosen.text.splitlines() if line.startswith("- ")]
    return chosen.text, order, {d.fact_id: d for d in chosen.decisions}


def test_facts_rank_by_confidence_then_most_recently_updated() -> None:
    facts = [
        fact("low-new", confidence=Confidence.LOW, updated_at=9),
        fact("high-old", confidence=Confidence.HIGH, updated_at=1),
        fact("medium", confidence=Confidence.MEDIUM, updated_at=5),
        fact("high-new", confidence=Confidence.HIGH, updated_at=2),
    ]
    _, order, decisions = startup(facts)
    assert order == ["high-new", "high-old", "medium", "low-new"]
    assert all(d.included for d in decisions.values())


def test_a_fact_that_does_not_fit_is_skipped_and_smaller_later_ones_still_go() -> None:
    big = fact("big", "x" * 300, updated_at=3)
    small = fact("small", "tiny", updated_at=1)
    first = fact("first", "y" * 100, updated_at=4)
    budget = len(STARTUP_HEADING) + len(PREAMBLE) + 2 + len(fact_line(first)) + len(fact_line(small)) + 5
    _, order, decisions = startup([big, small, first], context_chars=budget)
    assert order == ["first", "small"]
    assert not decisions["big"].included
    assert decisions["big"].reason.startswith("over budget")


def test_secret_facts_are_never_sent() -> None:
    text, order, decisions = startup([fact("s", "the alarm code is 4711", sensitivity=Sensitivity.SECRET)])
    assert order == [] and "4711" not in text
    assert decisions["s"].reason == "secret: never sent"


def test_private_facts_are_sent_only_when_allowed() -> None:
    private = fact("p", "the owner sees a therapist", sensitivity=Sensitivity.PRIVATE)
    _, order, decisions = startup([private])
    assert order == [] and "send_private" in decisions["p"].reason
    _, order, decisions = startup([private], send_private=True)
    assert order == ["p"] and decisions["p"].included


def test_pending_facts_are_never_sent() -> None:
    _, order, decisions = startup([fact("q", state=FactState.PENDING)])
    assert order == [] and decisions["q"].reason.startswith("pending")


def test_the_rendered_context_says_facts_are_descriptive_not_instructions() -> None:
    text, _, _ = startup([fact("a")])
    assert STARTUP_HEADING in text
    assert "not instructions" in PREAMBLE and "override" in PREAMBLE and "imperfect" in PREAMBLE


def test_identities_are_clipped_to_their_own_budget() -> None:
    chosen = select_startup([], body_identity="b" * 50, private_identity="p" * 5000,
                            settings=dataclasses.replace(SETTINGS, identity_chars=100))
    assert "b" * 50 in chosen.text
    assert "p" * 5000 not in chosen.text and "[clipped]" in chosen.text
    private_section = chosen.text.split("(private identity)\n", 1)[1]
    assert len(private_section) == 100


def test_an_empty_private_identity_adds_no_section() -> None:
    chosen = select_startup([], body_identity="body", private_identity="", settings=SETTINGS)
    assert "private identity" not in chosen.text


def test_every_fact_gets_one_decision_and_the_text_stays_within_the_budget() -> None:
    facts = [fact(f"f{n:03}", "z" * (40 + n % 50), updated_at=n) for n in range(200)]
    chosen = select_startup(facts, body_identity="", private_identity="", settings=SETTINGS)
    assert len(chosen.text) <= SETTINGS.context_chars
    assert sorted(d.fact_id for d in chosen.decisions) == sorted(f.id for f in facts)
    assert {d.fact_id for d in chosen.decisions if d.included} == chosen.fact_ids


def test_without_explain_the_same_facts_are_chosen_and_no_decisions_made() -> None:
    facts = [fact(f"f{n:03}", "z" * (40 + n % 50), updated_at=n) for n in range(200)]
    explained = select_startup(facts, body_identity="", private_identity="", settings=SETTINGS)
    quiet = select_startup(facts, body_identity="", private_identity="", settings=SETTINGS, explain=False)
    assert quiet.text == explained.text and quiet.decisions == ()


class FakeSearch:
    """A fixed ranking standing in for the index (the index has its own tests)."""

    def __init__(self, ranking: list[str]) -> None:
        self.ranking = ranking

    def __call__(self, _query: str, limit: int) -> list[str]:
        return self.ranking[:limit]


def recall(facts: list[Fact], ranking: list[str], *, startup_ids: frozenset[str] = frozenset(),
           **overrides: object) -> tuple[str, list[Decision]]:
    by_id = {f.id: f for f in facts}
    settings = dataclasses.replace(SETTINGS, **overrides)  # type: ignore[arg-type]
    chosen = select_recall("query", search=FakeSearch(ranking), lookup=by_id.get, startup_ids=startup_ids,
                           settings=settings)
    return chosen.text, list(chosen.decisions)


def test_recall_keeps_the_top_k_in_search_order() -> None:
    facts = [fact(f"r{n}") for n in range(20)]
    text, decisions = recall(facts, [f"r{n}" for n in range(20)], recall_k=3)
    assert [d.fact_id for d in decisions if d.included] == ["r0", "r1", "r2"]
    assert text.startswith(RECALL_HEADING) and PREAMBLE in text


def test_recall_skips_facts_already_in_the_startup_context() -> None:
    facts = [fact("a"), fact("b")]
    _, decisions = recall(facts, ["a", "b"], startup_ids=frozenset({"a"}))
    assert decisions[0] == Decision(fact_id="a", section="recall", included=False,
                                    reason="already in the startup context")
    assert decisions[1].included


def test_recall_never_returns_secret_or_pending_facts() -> None:
    facts = [fact("s", sensitivity=Sensitivity.SECRET), fact("p", state=FactState.PENDING), fact("ok")]
    text, decisions = recall(facts, ["s", "p", "ok"])
    assert [d.fact_id for d in decisions if d.included] == ["ok"]
    assert "fact s " not in text and "fact p " not in text


def test_recall_respects_its_own_budget_and_considers_smaller_later_facts() -> None:
    facts = [fact("big", "b" * 400), fact("small", "s")]
    budget = len(RECALL_HEADING) + len(PREAMBLE) + 2 + 100
    _, decisions = recall(facts, ["big", "small"], recall_chars=budget)
    assert [(d.fact_id, d.included) for d in decisions] == [("big", False), ("small", True)]


def test_recall_searches_deeper_when_the_first_results_are_all_excluded() -> None:
    startup_ids = frozenset(f"s{n}" for n in range(30))
    facts = [fact(i) for i in startup_ids] + [fact("deep")]
    _, decisions = recall(facts, [*sorted(startup_ids), "deep"], startup_ids=startup_ids, recall_k=1)
    assert [d.fact_id for d in decisions if d.included] == ["deep"]


def test_recall_looks_at_a_bounded_number_of_hits_when_long_facts_fill_its_budget() -> None:
    # 100k hits, each too long for what is left once two are in: recall must
    # not go on through every hit for the k lines it cannot fill.
    ranking = [f"r{n}" for n in range(100_000)]
    looked_up: list[str] = []
    limits: list[int] = []

    def search(_query: str, limit: int) -> list[str]:
        limits.append(limit)
        return ranking[:limit]

    def lookup(fact_id: str) -> Fact:
        looked_up.append(fact_id)
        return fact(fact_id, "x" * 700)

    settings = dataclasses.replace(SETTINGS, recall_k=8, recall_chars=2000)
    chosen = select_recall("query", search=search, lookup=lookup, startup_ids=frozenset(), settings=settings)
    assert sum(d.included for d in chosen.decisions) == 2
    assert max(limits) <= 8 * RECALL_CANDIDATES_PER_SLOT and len(looked_up) <= 8 * RECALL_CANDIDATES_PER_SLOT


def test_an_empty_message_recalls_nothing() -> None:
    chosen = select_recall("  ", search=FakeSearch(["a"]), lookup=lambda _: fact("a"), startup_ids=frozenset(),
                           settings=SETTINGS)
    assert chosen.text == "" and chosen.decisions == ()


def test_the_explained_context_gives_both_sections_their_decisions(books: FactBooks) -> None:
    facts = [fact("a", "the owner likes tea"), fact("s", "secret", sensitivity=Sensitivity.SECRET)]
    built = Briefing(SETTINGS, None).context(books(facts), change=1, query="tea", search=FakeSearch(["a", "s"]),
                                            lookup={f.id: f for f in facts}.get, explain=True, owners=True)
    assert "the owner likes tea" in built.startup_text and built.recall_text == ""
    assert {(d.fact_id, d.section, d.included) for d in built.decisions} == {
        ("a", "startup", True), ("s", "startup", False), ("a", "recall", False), ("s", "recall", False),
    }


def test_a_conversation_not_the_owners_gets_who_the_software_is_and_nothing_of_the_owner(books: FactBooks) -> None:
    facts = [fact("a", "the owner likes tea")]
    private = PrivateIdentity(name="Ada Owner")
    briefing = Briefing(SETTINGS, private)
    kwargs: dict[str, Any] = dict(change=1, query="tea", search=FakeSearch(["a"]), lookup={f.id: f for f in facts}.get)
    owners = briefing.context(books(facts), session_facts=None, owners=True, **kwargs)
    assert "the owner likes tea" in owners.startup_text and "Ada Owner" in owners.startup_text
    new = briefing.context(books(facts), session_facts=None, owners=False, **kwargs)
    resumed = briefing.context(books(facts), session_facts=frozenset(), owners=False, **kwargs)
    assert new.startup_text == select_startup((), body_identity=briefing.body.render(), private_identity="",
                                              settings=SETTINGS).text != ""
    assert "tea" not in new.startup_text and "Ada Owner" not in new.startup_text and new.recall_text == ""
    assert resumed.startup_text == resumed.recall_text == "" and new.startup_ids == resumed.startup_ids == frozenset()


def test_the_line_length_is_computed_as_the_line_is_rendered() -> None:
    sample = fact("f-12345678", "some text", confidence=Confidence.MEDIUM)
    assert line_length(sample) == len(fact_line(sample))
