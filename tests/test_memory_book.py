"""The facts as the Memory actor reads them from LMDB: selection for
forgetting (an exact id wins, one match or a refusal listing them), listing,
counts by state, writes staged for the next commit seen at once."""

from __future__ import annotations

from fact_books import FactBooks, put, remove

from enact.memory.book import FactBook
from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity


def _fact(fact_id: str, text: str, *, tags: tuple[str, ...] = (), state: FactState = FactState.ACTIVE,
          updated_at: float = 1.0, origin: str = "human-cli") -> Fact:
    return Fact(id=fact_id, text=text, type=FactType.FACT, scope=Scope.USER, subject="", confidence=Confidence.HIGH,
                sensitivity=Sensitivity.NORMAL, tags=tags, refs=(), origin=origin, state=state, created_at=1.0,
                updated_at=updated_at)


def test_an_exact_id_wins_over_a_text_match(books: FactBooks) -> None:
    book = books([_fact("f-00000001", "likes tea"), _fact("f-00000002", "see f-00000001")])
    selected = book.select("f-00000001")
    assert isinstance(selected, Fact) and selected.id == "f-00000001"


def test_the_normalised_equal_text_is_selected_before_substrings(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea"), _fact("f-2", "likes tea with milk")])
    selected = book.select("Likes  TEA.")
    assert isinstance(selected, Fact) and selected.id == "f-1"


def test_one_substring_or_tag_match_is_selected(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea"), _fact("f-2", "rides a bike", tags=("home-lab",))])
    assert getattr(book.select("tea"), "id", None) == "f-1"
    assert getattr(book.select("Home Lab"), "id", None) == "f-2"


def test_several_matches_are_refused_listing_them_newest_first(books: FactBooks) -> None:
    book = books([_fact(f"f-{n}", f"likes tea number {n}", updated_at=float(n)) for n in range(1, 8)])
    refused = book.select("likes tea")
    assert isinstance(refused, str) and refused.startswith("refused: 7 facts match")
    assert refused.index("f-7") < refused.index("f-6") and "and 2 more" in refused and "\n" not in refused


def test_no_match_and_an_empty_selector_are_refused(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea")])
    assert "no fact matches" in str(book.select("coffee"))
    assert "give a fact id" in str(book.select("  . "))


def test_listing_filters_and_counts_follow_puts_and_removals(books: FactBooks) -> None:
    book = books([_fact("f-1", "a", tags=("x",), updated_at=1.0),
                     _fact("f-2", "b", state=FactState.PENDING, origin="model-marker", updated_at=2.0)])
    assert _listed(book) == ["f-2", "f-1"]
    assert _listed(book, tag="x") == ["f-1"]
    assert _listed(book, origin="model-marker", pending=True) == ["f-2"]
    assert book.counts() == {FactState.ACTIVE: 1, FactState.PENDING: 1}
    put(book, _fact("f-2", "b", state=FactState.ACTIVE))
    remove(book, "f-1")
    assert book.counts() == {FactState.ACTIVE: 1, FactState.PENDING: 0}
    assert book.by_key("a") is None and getattr(book.by_key("b"), "id", None) == "f-2"


def test_a_tag_on_one_fact_and_the_text_of_another_are_several_matches(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea", updated_at=2.0), _fact("f-2", "rides a bike", tags=("tea",))])
    refused = book.select("tea")
    assert isinstance(refused, str) and refused.startswith("refused: 2 facts match")


def test_a_removed_or_rewritten_fact_is_no_longer_found_by_its_old_tag(books: FactBooks) -> None:
    book = books([_fact("f-1", "rides a bike", tags=("home-lab",)), _fact("f-2", "likes tea", tags=("home-lab",))])
    assert "2 facts match" in str(book.select("home-lab"))
    remove(book, "f-2")
    assert getattr(book.select("home-lab"), "id", None) == "f-1"
    put(book, _fact("f-1", "rides a bike", tags=("garage",)))
    assert "no fact matches" in str(book.select("home-lab"))
    assert _listed(book, tag="garage") == ["f-1"]
    assert _listed(book, tag="home-lab") == []


def test_lookups_made_again_from_the_facts_agree_with_lookups_kept_through_changes(books: FactBooks) -> None:
    def changed(book: FactBook) -> FactBook:
        put(book, _fact("f-3", "plays chess", tags=("games",), updated_at=3.0))
        remove(book, "f-1")
        put(book, _fact("f-2", "likes green tea", tags=("drinks",), updated_at=4.0))
        return book

    def seen(book: FactBook) -> object:
        return (getattr(book.by_key("likes green tea"), "id", None), book.by_key("likes tea"),
                _listed(book, tag="drinks"), _listed(book, tag="games"), _listed(book),
                book.ranking.select(1000, send_private=False), getattr(book.select("games"), "id", None))

    facts = [_fact("f-1", "likes tea", tags=("drinks",)), _fact("f-2", "likes green tea", updated_at=2.0)]
    kept = changed(books(facts))
    remade = changed(books(facts))
    remade.store.write(remade.records.remake_lookups, fenced=False)
    assert seen(kept) == seen(remade)
    assert seen(kept)[:5] == ("f-2", None, ["f-2"], ["f-3"], ["f-2", "f-3"])


def test_a_write_staged_for_the_next_commit_is_seen_by_get_and_by_key_at_once(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea")])
    staged = book.staged(_fact("f-2", "rides a bike"))
    removal = book.staged(_fact("f-1", "likes tea"), removed=True)
    assert getattr(book.by_key("rides a bike"), "id", None) == "f-2" and book.get("f-1") is None
    assert book.by_key("likes tea") is None and book.new_id() not in {"f-1", "f-2"}
    book.settle(removal)  # not committed (as if the write failed): LMDB says what is
    assert getattr(book.get("f-1"), "id", None) == "f-1"
    put(book, _fact("f-2", "rides a bike"))
    book.settle(staged)
    assert getattr(book.by_key("rides a bike"), "id", None) == "f-2"


def test_a_lookup_of_a_home_an_older_enact_wrote_is_not_current(books: FactBooks) -> None:
    book = books([_fact("f-1", "likes tea")])
    assert book.store.read(book.records.lookups_current)
    book.store.write(lambda txn: book.records.facts.delete(txn, b"f-1"), fenced=False)  # no lookups changed
    book.store.write(lambda txn: txn.put(b"change", b'{"change":9,"v":1}', db=book.records.meta.table.handle),
                     fenced=False)
    assert not book.store.read(book.records.lookups_current)
    book.store.write(book.records.remake_lookups, fenced=False)
    assert book.store.read(book.records.lookups_current) and book.by_key("likes tea") is None


def _listed(book: FactBook, *, tag: str = "", origin: str = "", pending: bool = False) -> list[str]:
    facts, total = book.listing(tag=tag, origin=origin, pending=pending, limit=100)
    assert total == len(facts)
    return [fact.id for fact in facts]
