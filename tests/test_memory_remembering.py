"""The Memory actor's write rules (enact.memory.remembering), without the actor."""

from __future__ import annotations

from fact_books import FactBooks

from enact.memory.book import FactBook
from enact.memory.facts import FactState
from enact.memory.remembering import NEEDS_HUMAN, Write, confirmed, held, needs_human, remembered
from enact.messages.common import HUMAN_CLI, MODEL_ACTION, NotFound, RefusalCode, Refused
from enact.messages.memory import NOT_ADMITTED, Confirmed, Merged, Pending, Remember, Saved


def _remember(book: FactBook, text: str, origin: str = HUMAN_CLI, *, hold: str = "",
              hold_model_facts: bool = False) -> Write | Merged | Refused:
    return remembered(Remember(text=text, origin=origin, hold=hold), book, max_chars=500,
                      hold_model_facts=hold_model_facts, now=100.0)


def test_a_new_fact_from_the_owner_is_a_write_of_an_active_fact_answered_saved(books: FactBooks) -> None:
    decided = _remember(books(), "the owner likes tea")
    assert isinstance(decided, Write)
    assert decided.fact.state is FactState.ACTIVE
    assert decided.entry.change == "created"
    assert decided.reply == Saved(id=decided.fact.id, clipped=False)


def test_a_models_fact_is_held_when_the_config_says_so(books: FactBooks) -> None:
    decided = _remember(books(), "the owner likes tea", MODEL_ACTION, hold_model_facts=True)
    assert isinstance(decided, Write)
    assert decided.fact.state is FactState.PENDING
    assert isinstance(decided.reply, Pending) and decided.entry.held == decided.reply.why


def test_a_write_to_hold_that_meets_an_active_fact_leaves_it_unchanged(books: FactBooks) -> None:
    first = _remember(books(), "the owner likes tea")
    assert isinstance(first, Write)
    book = books([first.fact])
    assert _remember(book, "the owner likes tea", hold="not the owner's conversation") == Merged(
        id=first.fact.id, unchanged=True)


def test_a_refused_fact_is_answered_at_once(books: FactBooks) -> None:
    assert _remember(books(), "   ") == Refused(reason="refused: the text is empty", code=NOT_ADMITTED)


def test_only_a_human_confirms_a_held_fact(books: FactBooks) -> None:
    decided = _remember(books(), "the owner likes tea", MODEL_ACTION, hold_model_facts=True)
    assert isinstance(decided, Write)
    book = books([decided.fact])
    assert held(book, decided.fact.id, MODEL_ACTION, "confirm") == Refused(
        reason=NEEDS_HUMAN.format(verb="confirm"), code=RefusalCode.NOT_HUMAN)
    fact = held(book, f" {decided.fact.id} ", HUMAN_CLI, "confirm")
    assert fact == decided.fact
    write = confirmed(decided.fact, HUMAN_CLI, now=200.0)
    assert write.fact.state is FactState.ACTIVE and write.fact.updated_at == 200.0
    assert write.reply == Confirmed(id=decided.fact.id)


def test_an_active_or_missing_fact_is_not_held(books: FactBooks) -> None:
    decided = _remember(books(), "the owner likes tea")
    assert isinstance(decided, Write)
    book = books([decided.fact])
    assert held(book, decided.fact.id, HUMAN_CLI, "reject") == Refused(
        reason=f"refused: {decided.fact.id} is not held for confirmation", code=RefusalCode.WRONG_STATE)
    assert held(book, "f-nothing", HUMAN_CLI, "reject") == NotFound(kind="fact", id="f-nothing")


def test_a_models_word_to_forget_is_refused_a_persons_is_not() -> None:
    assert needs_human(MODEL_ACTION, "forget") == Refused(reason="refused: forget needs a human; a model cannot forget",
                                                          code=RefusalCode.NOT_HUMAN)
    assert needs_human(HUMAN_CLI, "forget") is None
    assert needs_human("chat:telegram:1", "forget") is None
