"""The full-text index of facts: BM25 over text, tags and subject, on tantivy.

The index is derived data. LMDB holds the facts; the index records, in a
small marker written after each tantivy commit, which change of the facts it
reflects. A missing, stale or corrupt index reads as "reflects nothing"
(``reflected_change()`` is None or differs from the facts' counter) and the
owner rebuilds it from the facts.

A tantivy commit costs milliseconds, so commits are grouped by the caller;
facts staged since the last commit are searched from memory beside the index
(and removed ones hidden at once), so a search sees every acknowledged fact.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson
import tantivy

from enact.errors import EnactError
from enact.memory.facts import Fact

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""Raised whenever the fields or the analyzer change: an index made by
another version is rebuilt."""

_ANALYZER = "enact_en"
_FIELDS = ("text", "tags", "subject")
_INDEX_DIR = "tantivy"
_MARKER = "reflects.json"
_WRITER_HEAP = 32_000_000
_BM25_K1 = 1.2
_BM25_B = 0.75


def _analyzer() -> tantivy.TextAnalyzer:
    """Words, lowercased, without English stop words, stemmed: the same
    analysis for documents, queries and the facts searched from memory."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    for field in _FIELDS:
        builder.add_text_field(field, tokenizer_name=_ANALYZER, index_option="freq")
    return builder.build()


class IndexUnwritable(EnactError, RuntimeError):
    """The index could not be written (a full disk, say). It is then stale:
    searches go on, every fact scored from memory, until a rebuild works."""


def _field_values(fact: Fact) -> dict[str, str]:
    return {"text": fact.text, "tags": " ".join(fact.tags), "subject": fact.subject}


class FactIndex:
    """One instance per index directory, used by one actor (not thread-safe)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._analyzer = _analyzer()
        self._schema = _schema()
        self._index: tantivy.Index | None = None
        self._writer: tantivy.IndexWriter | None = None
        self._searcher: tantivy.Searcher | None = None
        self._staged: dict[str, Fact] = {}
        self._removed: set[str] = set()
        self._reflected = self._open()

    # -- opening, the marker ---------------------------------------------------

    @property
    def _tantivy_dir(self) -> Path:
        return self.directory / _INDEX_DIR

    def _open(self) -> int | None:
        """Open the committed index; None (and no index) when it is missing,
        of another schema, or does not open."""
        marker = self._read_marker()
        if marker is None or not self._tantivy_dir.is_dir():
            return None
        try:
            index = tantivy.Index(self._schema, path=str(self._tantivy_dir), reuse=True)
            index.register_tokenizer(_ANALYZER, self._analyzer)
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            index.reload()
            searcher = index.searcher()
        except BaseException as error:  # tantivy reports some corruption as a Rust panic
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            log.warning("the memory index in %s does not open (%s): it will be rebuilt", self._tantivy_dir, error)
            return None
        self._index, self._writer, self._searcher = index, writer, searcher
        return marker

    def _read_marker(self) -> int | None:
        try:
            value = orjson.loads((self.directory / _MARKER).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(value, dict) or value.get("schema") != SCHEMA_VERSION:
            return None
        change = value.get("change")
        return change if isinstance(change, int) and not isinstance(change, bool) else None

    def _write_marker(self, change: int) -> None:
        path = self.directory / _MARKER
        temporary = path.with_suffix(".tmp")
        with open(temporary, "wb") as file:
            file.write(orjson.dumps({"schema": SCHEMA_VERSION, "change": change}))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        self._reflected = change

    def reflected_change(self) -> int | None:
        """The facts' change counter the committed index reflects; None when
        the index is missing or corrupt."""
        return self._reflected

    # -- writing -------------------------------------------------------------

    def rebuild(self, facts: Iterable[Fact], change: int) -> int:
        """Replace the index with one made from ``facts``, reflecting
        ``change``, and say how many; raises IndexUnwritable (and searches
        every fact from memory until a rebuild works: ``facts`` is iterated
        again then) when it cannot be written."""
        count = 0
        self._drop_writer()
        self._reflected = None
        self._index = self._searcher = None
        try:
            (self.directory / _MARKER).unlink(missing_ok=True)
            shutil.rmtree(self._tantivy_dir, ignore_errors=True)
            self._tantivy_dir.mkdir(parents=True)
            index = tantivy.Index(self._schema, path=str(self._tantivy_dir), reuse=False)
            index.register_tokenizer(_ANALYZER, self._analyzer)
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            for fact in facts:
                writer.add_document(tantivy.Document(id=fact.id, **_field_values(fact)))
                count += 1
            writer.commit()
            index.reload()
            self._index, self._writer, self._searcher = index, writer, index.searcher()
            self._write_marker(change)
        except (OSError, ValueError) as error:  # tantivy reports an I/O error as ValueError
            self._index = self._writer = self._searcher = None
            shutil.rmtree(self._tantivy_dir, ignore_errors=True)  # a half-made index only takes space
            self._staged = {fact.id: fact for fact in facts}
            self._removed.clear()
            raise IndexUnwritable(str(error)) from None
        self._staged.clear()
        self._removed.clear()
        return count

    def stage(self, fact: Fact) -> None:
        """Add or replace a fact; searchable at once, durable in the index at
        the next commit."""
        self._removed.discard(fact.id)
        self._staged[fact.id] = fact

    def unstage(self, fact_id: str) -> None:
        """Remove a fact (staged or committed); gone from search at once."""
        self._staged.pop(fact_id, None)
        self._removed.add(fact_id)

    def commit(self, change: int) -> None:
        """One tantivy commit for everything staged or removed, then the
        marker that says the index reflects ``change``. Without an open index
        (missing or corrupt) there is nothing to commit to: the owner rebuilds."""
        if self._writer is None or self._index is None:
            return
        try:
            for fact_id in self._removed | self._staged.keys():
                self._writer.delete_documents_by_term("id", fact_id)
            for fact in self._staged.values():
                self._writer.add_document(tantivy.Document(id=fact.id, **_field_values(fact)))
            self._writer.commit()
            self._index.reload()
            self._searcher = self._index.searcher()
        except (OSError, ValueError) as error:  # tantivy reports an I/O error as ValueError
            # What was committed before still searches, and what was staged
            # stays staged, searched from memory. No writer: the owner rebuilds.
            self._writer = None
            self._reflected = None
            raise IndexUnwritable(str(error)) from None
        self._staged.clear()
        self._removed.clear()
        try:
            self._write_marker(change)
        except OSError as error:
            self._reflected = None
            raise IndexUnwritable(str(error)) from None

    @property
    def pending(self) -> int:
        """Staged additions and removals not yet committed."""
        return len(self._staged) + len(self._removed)

    def close(self) -> None:
        self._close_writer()
        self._index = None
        self._searcher = None

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None

    def _drop_writer(self) -> None:
        """Close the writer if it closes: one that failed may not."""
        try:
            self._close_writer()
        except (OSError, ValueError) as error:
            log.debug("the memory index writer did not close cleanly: %s", error)
        self._writer = None

    # -- searching ----------------------------------------------------------

    def _terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(self._analyzer.analyze(query)))

    def search(self, query: str, limit: int) -> list[str]:
        """Fact ids, best first. The query is analysed like the facts and
        built term by term, so no character in it is query syntax."""
        terms = self._terms(query)
        if not terms or limit <= 0:
            return []
        scored: list[tuple[float, str]] = []
        # An empty index (no fact yet) has nothing to find: no query is built.
        if self._searcher is not None and self._searcher.num_docs:
            clauses = [
                (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, field, term))
                for term in terms
                for field in _FIELDS
            ]
            hidden = self._removed | self._staged.keys()
            hits = self._searcher.search(tantivy.Query.boolean_query(clauses), limit + len(hidden), count=False).hits
            for score, address in hits:
                fact_id = self._searcher.doc(address)["id"][0]
                if fact_id not in hidden:
                    scored.append((score, fact_id))
        scored.extend(self._score_staged(terms))
        scored.sort(key=lambda hit: -hit[0])
        return [fact_id for _, fact_id in scored[:limit]]

    def _score_staged(self, terms: Sequence[str]) -> list[tuple[float, str]]:
        """BM25 for the few facts not yet committed, with the committed
        index's document frequencies, so they rank among its hits."""
        if not self._staged:
            return []
        analysed = {
            fact_id: {field: Counter(self._analyzer.analyze(value)) for field, value in _field_values(fact).items()}
            for fact_id, fact in self._staged.items()
        }
        committed = self._searcher.num_docs if self._searcher is not None else 0
        total = committed + len(analysed)
        scored = []
        for field in _FIELDS:
            lengths = [sum(fields[field].values()) for fields in analysed.values()]
            average = max(1.0, sum(lengths) / len(lengths))
            for term in terms:
                frequency = sum(1 for fields in analysed.values() if term in fields[field])
                if frequency == 0:
                    continue
                if self._searcher is not None:
                    frequency += self._searcher.doc_freq(field, term)
                idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
                for fact_id, fields in analysed.items():
                    tf = fields[field][term]
                    if tf:
                        length = sum(fields[field].values())
                        norm = tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * length / average)
                        scored.append((idf * tf * (_BM25_K1 + 1) / norm, fact_id))
        totals: dict[str, float] = {}
        for score, fact_id in scored:
            totals[fact_id] = totals.get(fact_id, 0.0) + score
        return [(score, fact_id) for fact_id, score in totals.items()]
