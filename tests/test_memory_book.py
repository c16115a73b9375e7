"""The facts in memory: selection for forgetting (an exact id wins, one
match or a refusal listing them), listing, counts by state."""

from __future__ import annotations

from enact.memory.book import FactBook
from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity


def _fact(fact_id: str, text: str, *, tags: tuple[str, ...] = (), state: FactState = FactState.ACTIVE,
          updated_at: float = 1.0, origin: str = "human-cli") -> Fact:
    return Fact(id=fact_id, text=text, type=FactType.FACT, scope=Scope.USER, subject="", confidence=Confidence.HIGH,
                sensitivity=Sensitivity.NORMAL, tags=tags, refs=(), origin=origin, state=state, created_at=1.0,
                updated_at=updated_at)


def test_an_exact_id_wins_over_a_text_match() -> None:
    book = FactBook([_fact("f-00000001", "likes tea"), _fact("f-00000002", "see f-00000001")])
    selected = book.select("f-00000001")
    assert isinstance(selected, Fact) and selected.id == "f-00000001"


def test_the_normalised_equal_text_is_selected_before_substrings() -> None:
    book = FactBook([_fact("f-1", "likes tea"), _fact("f-2", "likes tea with milk")])
    selected = book.select("Likes  TEA.")
    assert isinstance(selected, Fact) and selected.id == "f-1"


def test_one_substring_or_tag_match_is_selected() -> None:
    book = FactBook([_fact("f-1", "likes tea"), _fact("f-2", "rides a bike", tags=("home-lab",))])
    assert getattr(book.select("tea"), "id", None) == "f-1"
    assert getattr(book.select("Home Lab"), "id", None) == "f-2"


def test_several_matches_are_refused_listing_them_newest_first() -> None:
    book = FactBook([_fact(f"f-{n}", f"likes tea number {n}", updated_at=float(n)) for n in range(1, 8)])
    refused = book.select("likes tea")
    assert isinstance(refused, str) and refused.startswith("refused: 7 facts match")
    assert refused.index("f-7") < refused.index("f-6") and "and 2 more" in refused and "\n" not in refused


def test_no_match_and_an_empty_selector_are_refused() -> None:
    book = FactBook([_fact("f-1", "likes tea")])
    assert "no fact matches" in str(book.select("coffee"))
    assert "give a fact id" in str(book.select("  . "))


def test_listing_filters_and_counts_follow_puts_and_removals() -> None:
    book = FactBook([_fact("f-1", "a", tags=("x",), updated_at=1.0),
                     _fact("f-2", "b", state=FactState.PENDING, origin="model-marker", updated_at=2.0)])
    assert [f.id for f in book.listing(tag="", origin="", pending=False)] == ["f-2", "f-1"]
    assert [f.id for f in book.listing(tag="x", origin="", pending=False)] == ["f-1"]
    assert [f.id for f in book.listing(tag="", origin="model-marker", pending=True)] == ["f-2"]
    assert (book.states[FactState.ACTIVE], book.states[FactState.PENDING]) == (1, 1)
    book.put(_fact("f-2", "b", state=FactState.ACTIVE))
    book.remove("f-1")
    assert (book.states[FactState.ACTIVE], book.states[FactState.PENDING]) == (1, 0)
    assert book.by_key("a") is None and getattr(book.by_key("b"), "id", None) == "f-2"


def test_a_tag_on_one_fact_and_the_text_of_another_are_several_matches() -> None:
    book = FactBook([_fact("f-1", "likes tea", updated_at=2.0), _fact("f-2", "rides a bike", tags=("tea",))])
    refused = book.select("tea")
    assert isinstance(refused, str) and refused.startswith("refused: 2 facts match")


def test_a_removed_or_rewritten_fact_is_no_longer_found_by_its_old_tag() -> None:
    book = FactBook([_fact("f-1", "rides a bike", tags=("home-lab",)), _fact("f-2", "likes tea", tags=("home-lab",))])
    assert "2 facts match" in str(book.select("home-lab"))
    book.remove("f-2")
    assert getattr(book.select("home-lab"), "id", None) == "f-1"
    book.put(_fact("f-1", "rides a bike", tags=("garage",)))
    assert "no fact matches" in str(book.select("home-lab"))
    assert [f.id for f in book.listing(tag="garage", origin="", pending=False)] == ["f-1"]
    assert book.listing(tag="home-lab", origin="", pending=False) == []


def test_lookups_made_after_changes_agree_with_lookups_kept_through_them() -> None:
    def changed(book: FactBook) -> FactBook:
        book.put(_fact("f-3", "plays chess", tags=("games",), updated_at=3.0))
        book.remove("f-1")
        book.put(_fact("f-2", "likes green tea", tags=("drinks",), updated_at=4.0))
        return book

    def seen(book: FactBook) -> object:
        return (getattr(book.by_key("likes green tea"), "id", None), book.by_key("likes tea"),
                {tag: sorted(ids) for tag, ids in book.by_tag.items()},
                book.ranking.select(1000, send_private=False), getattr(book.select("games"), "id", None))

    facts = [_fact("f-1", "likes tea", tags=("drinks",)), _fact("f-2", "likes green tea", updated_at=2.0)]
    later = changed(FactBook(facts))
    warmed = FactBook(facts)
    warmed.warm()
    assert seen(later) == seen(changed(warmed))
    assert seen(later)[:3] == ("f-2", None, {"drinks": ["f-2"], "games": ["f-3"]})
