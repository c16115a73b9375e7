"""The fact index: real tantivy in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from enact.memory.facts import Confidence, Fact, FactState, FactType, Scope, Sensitivity
from enact.memory.index import FactIndex


def fact(fact_id: str, text: str, *, tags: tuple[str, ...] = (), subject: str = "") -> Fact:
    return Fact(
        id=fact_id, text=text, type=FactType.FACT, scope=Scope.USER, subject=subject,
        confidence=Confidence.HIGH, sensitivity=Sensitivity.NORMAL, tags=tags, refs=(),
        origin="human-cli", state=FactState.ACTIVE, created_at=1.0, updated_at=1.0,
    )


FACTS = [
    fact("tea", "The owner prefers green tea over coffee"),
    fact("deploy", "Deploys go through the staging server first", tags=("ops",)),
    fact("sister", "Maya is the owner's sister", subject="maya"),
    fact("editor", "The owner edits code in Helix", tags=("tools", "editor")),
]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[FactIndex]:
    built = FactIndex(tmp_path / "index")
    built.rebuild(FACTS, change=4)
    yield built
    built.close()


def test_a_missing_index_reflects_no_change(tmp_path: Path) -> None:
    index = FactIndex(tmp_path / "nothing-here")
    assert index.reflected_change() is None
    assert index.search("tea", 8) == []
    index.close()


def test_search_ranks_by_text_tags_and_subject(index: FactIndex) -> None:
    assert index.search("what tea does the owner drink", 8)[0] == "tea"
    assert index.search("ops", 8) == ["deploy"]
    assert index.search("maya", 8) == ["sister"]
    assert index.search("which editor", 8)[0] == "editor"


def test_words_are_stemmed_so_inflections_match(index: FactIndex) -> None:
    assert index.search("deploying to staging", 8)[0] == "deploy"


@pytest.mark.parametrize("query", ['AND OR NOT', 'tea" (', "field:value", "+tea -coffee*", "[a TO b]", "~^\\", ""])
def test_query_syntax_characters_never_raise(index: FactIndex, query: str) -> None:
    results = index.search(query, 8)
    assert set(results) <= {f.id for f in FACTS}


def test_a_staged_fact_is_found_before_any_commit(index: FactIndex) -> None:
    index.stage(fact("tern", "The staging server is called tern", tags=("ops",)))
    assert "tern" in index.search("tern", 8)
    assert set(index.search("staging server", 8)) == {"tern", "deploy"}
    assert index.reflected_change() == 4


def test_a_replaced_fact_is_found_by_its_new_text_only(index: FactIndex) -> None:
    index.stage(fact("tea", "The owner prefers rooibos"))
    assert index.search("green tea", 8) == []
    assert index.search("rooibos", 8) == ["tea"]
    index.commit(change=5)
    assert index.search("green tea", 8) == []
    assert index.search("rooibos", 8) == ["tea"]


def test_a_removed_fact_disappears_from_search_at_once(index: FactIndex) -> None:
    index.unstage("deploy")
    assert index.search("staging", 8) == []
    index.commit(change=5)
    assert index.search("staging", 8) == []


def test_unstaging_a_staged_fact_hides_it(index: FactIndex) -> None:
    index.stage(fact("new", "A brand new fact about gardening"))
    index.unstage("new")
    assert index.search("gardening", 8) == []


def test_commit_records_the_change_and_survives_reopening(tmp_path: Path, index: FactIndex) -> None:
    index.stage(fact("tern", "The staging server is called tern"))
    index.commit(change=5)
    assert index.reflected_change() == 5
    index.close()
    reopened = FactIndex(tmp_path / "index")
    assert reopened.reflected_change() == 5
    assert reopened.search("tern", 8) == ["tern"]
    reopened.close()


def test_staged_work_lost_before_a_commit_leaves_the_index_stale(tmp_path: Path, index: FactIndex) -> None:
    # The facts' counter moved to 5 with this write; the index never committed it.
    index.stage(fact("tern", "The staging server is called tern"))
    index.close()
    reopened = FactIndex(tmp_path / "index")
    assert reopened.reflected_change() == 4
    assert reopened.search("tern", 8) == []
    reopened.close()


@pytest.mark.parametrize("damage", ["meta.json", ".store", ".term"])
def test_a_corrupt_index_reads_as_missing_and_rebuilds(tmp_path: Path, index: FactIndex, damage: str) -> None:
    index.close()
    for path in (tmp_path / "index" / "tantivy").iterdir():
        if path.name == damage or path.name.endswith(damage):
            path.write_bytes(b"garbage")
    damaged = FactIndex(tmp_path / "index")
    assert damaged.reflected_change() is None
    damaged.rebuild(FACTS, change=4)
    assert damaged.reflected_change() == 4
    assert damaged.search("helix", 8) == ["editor"]
    damaged.close()


def test_a_damaged_marker_reads_as_missing(tmp_path: Path, index: FactIndex) -> None:
    index.close()
    (tmp_path / "index" / "reflects.json").write_bytes(b"{not json")
    assert FactIndex(tmp_path / "index").reflected_change() is None


def test_search_respects_the_limit(tmp_path: Path) -> None:
    index = FactIndex(tmp_path / "index")
    index.rebuild([fact(f"f{n}", f"note {n} about the garden") for n in range(30)], change=30)
    index.stage(fact("staged", "one more note about the garden"))
    assert len(index.search("garden", 8)) == 8
    assert len(index.search("garden", 100)) == 31
    index.close()


# -- an index that cannot be written (a full disk) --------------------------------


def test_an_index_that_cannot_be_rebuilt_is_stale_and_searches_every_fact_from_memory(tmp_path: Path) -> None:
    from enact.memory.upkeep import IndexUpkeep

    directory = tmp_path / "memory-index"
    directory.mkdir()
    (directory / "tantivy").write_text("in the way")  # its rebuild cannot make the directory, as on a full disk
    facts = [fact("f1", "the zebra sleeps under the bridge"), fact("f2", "tea in the morning")]
    upkeep = IndexUpkeep.opened(directory, facts, change=2)
    assert upkeep.stale and upkeep.index.reflected_change() is None
    assert upkeep.index.search("where does the zebra sleep", 5) == ["f1"]
    assert not upkeep.commit(facts, 2)  # still stale: tried again later

    (directory / "tantivy").unlink()  # the space returns
    assert upkeep.commit(facts, 2)
    assert not upkeep.stale and upkeep.index.reflected_change() == 2
    assert upkeep.index.pending == 0 and upkeep.index.search("zebra", 5) == ["f1"]
    upkeep.index.close()
    assert FactIndex(directory).reflected_change() == 2


def test_a_commit_that_fails_keeps_what_was_staged_searchable_and_marks_the_index_stale(tmp_path: Path) -> None:
    import shutil

    from enact.memory.upkeep import IndexUpkeep

    directory = tmp_path / "memory-index"
    upkeep = IndexUpkeep.opened(directory, [fact("f1", "tea in the morning")], change=1)
    assert not upkeep.stale
    upkeep.index.stage(fact("f2", "the zebra sleeps under the bridge"))
    shutil.rmtree(directory / "tantivy")
    (directory / "tantivy").write_text("in the way")  # the commit's files cannot be written
    assert not upkeep.commit([], 2)
    assert upkeep.stale and upkeep.index.reflected_change() is None
    assert upkeep.index.search("zebra", 5) == ["f2"]
