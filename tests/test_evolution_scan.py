"""The evidence scan's plain logic: signal ids, the all-or-nothing check of
the model's reply, redaction before the call, and checkpoints, over a real
turn log in LMDB (no daemon)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from enact.actors._long_work import run_inline
from enact.chat import inbox_records
from enact.chat.turns import read_turns
from enact.evolution.scan_store import DATABASES, ScanTables
from enact.evolution.scan_validation import InvalidScanReply, parse_observations
from enact.evolution.scanning import Scanner
from enact.evolution.signals import EvidenceSource, SignalState, signal_id
from enact.messages.inbox import ReadTurns, Turn, Turns
from enact.messages.scanner import Scan, ScanReport, Signals
from enact.messages.tasks import ChangedTasks
from enact.runtime import RuntimeRequest, RuntimeResult
from enact.storage import Storage, Store

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def observation(**overrides: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "observation": "The owner had to repeat the request twice.", "evidence_type": "complaint",
        "affected_area": "conversation", "desired_outcome": "understand the first time", "confidence": 0.8,
        "explicit": True, "evidence_refs": ["turn:1"],
    }
    item.update(overrides)
    return item


def reply(*items: dict[str, Any]) -> str:
    return orjson.dumps(list(items)).decode()


def parse(text: str, refs: tuple[str, ...] = ("turn:1", "turn:2")) -> tuple[Any, ...]:
    return parse_observations(text, source=EvidenceSource.FEEDBACK, known_refs=set(refs), scan_id="", now=1.0)


def test_a_signal_id_ignores_case_spacing_trailing_punctuation_and_ref_order() -> None:
    first = signal_id("feedback", "The reply was  too LONG.", ["turn:2", "turn:1"])
    assert first == signal_id("feedback", "the reply was too long", ["turn:1", "turn:2"])
    assert first.startswith("sig-") and len(first) == 16
    assert first != signal_id("experience", "the reply was too long", ["turn:1", "turn:2"])
    assert first != signal_id("feedback", "the reply was too long", ["turn:1"])


def test_a_valid_reply_becomes_active_signals_and_a_repeated_observation_one() -> None:
    signals = parse(reply(observation(), observation(observation="the owner had to repeat the request twice")))
    assert len(signals) == 1
    assert signals[0].state is SignalState.ACTIVE and signals[0].evidence_refs == ("turn:1",)
    assert parse("  []\n") == ()


@pytest.mark.parametrize(("text", "reason"), [
    ("Here is what I found: " + reply(observation()), "not a JSON array"),
    ("```json\n" + reply(observation()) + "\n```", "not a JSON array"),
    (orjson.dumps({"observations": []}).decode(), "dict, not a JSON array"),
    (reply(*[observation(observation=f"thing {n}") for n in range(11)]), "at most 10"),
    (reply({k: v for k, v in observation().items() if k != "affected_area"}), "lacks affected_area"),
    (reply(observation(fix="rewrite the prompt")), "not allowed: fix"),
    (reply(observation(evidence_refs=["turn:9"])), "refs that were not sent"),
    (reply(observation(evidence_refs=[])), "non-empty list"),
    (reply(observation(observation="x" * 2001)), "at most 2000"),
    (reply(observation(confidence=1.5)), "confidence"),
    (reply(observation(confidence=True)), "confidence"),
    (reply(observation(explicit="yes")), "explicit"),
    (reply(observation(), observation(evidence_type="")), "observation 2: evidence_type"),
])
def test_any_fault_in_the_reply_refuses_the_whole_reply(text: str, reason: str) -> None:
    with pytest.raises(InvalidScanReply, match=reason):
        parse(text)


# -- the scan over a real turn log ------------------------------------------------


class TurnLog:
    """The turn log as the Inbox keeps it, read as ``inbox.ReadTurns`` reads it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.turns = inbox_records.TurnLog(store.log("logs.turns"))

    def add(self, *messages: str) -> None:
        def write(txn: Any) -> None:
            for message in messages:
                self.turns.append(txn, Turn(
                    event_id=f"e{time.monotonic_ns()}", channel="local", conversation="c", message_id="m",
                    message=message, reply="(scripted runtime) ok", time=time.time(),
                    outcome="replied", attempts=1, actions=()))

        self.store.write(write)

    def turns_read(self, since: int, limit: int) -> Turns:
        return self.store.read(lambda txn: read_turns(txn, self.turns, ReadTurns(since=since, limit=limit)))

    def last_turn(self, since: int) -> int:
        return self.store.read(lambda txn: read_turns(txn, self.turns, ReadTurns(since=since, last=1)).next_cursor)


class Reader:
    def __init__(self, log: TurnLog) -> None:
        self.log = log

    def turns(self, since: int, limit: int) -> Turns:
        return self.log.turns_read(since, limit)

    def last_turn(self, since: int) -> int:
        return self.log.last_turn(since)

    def changed_tasks(self, after: int, limit: int) -> ChangedTasks:
        return ChangedTasks(tasks=(), next_cursor=after, more=False)

    def task_running(self) -> bool:
        return False


class Model:
    """An in-process model: answers each call with the next of ``answers`` and keeps what it was sent."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[RuntimeRequest] = []

    def __call__(self, request: RuntimeRequest) -> RuntimeResult:
        self.requests.append(request)
        return RuntimeResult(text=self.answers.pop(0))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    try:
        yield storage.grant("scanner", (*DATABASES, "logs.turns"))
    finally:
        storage.close()


class Scanning:
    """A Scanner driven without threads (``run_inline``): each scan is over when ``scan`` returns."""

    def __init__(self, scanner: Scanner) -> None:
        self.tables = scanner.tables
        self._scanner = scanner

    def scan(self, message: Scan) -> ScanReport:
        reports: list[ScanReport] = []

        def failed(error: Exception) -> None:
            raise error

        self._scanner.scan(message, done=reports.append, failed=failed)
        [report] = reports
        return report


def scanner(store: Store, model: Model, batch: int = 20) -> Scanning:
    tables = ScanTables(store)
    tables.order_signals()  # as the scanner actor does at its start
    return Scanning(Scanner(tables, Reader(TurnLog(store)), model, batch=batch, timeout_s=5, off_thread=run_inline))


def test_a_credential_in_a_turn_never_reaches_the_model(store: Store) -> None:
    TurnLog(store).add(f"deploy failed again, use my token {GITHUB_TOKEN} and stop asking")
    model = Model("[]")
    report = scanner(store, model).scan(Scan(source="feedback"))
    assert [s.outcome for s in report.scans] == ["completed"]
    (request,) = model.requests
    assert GITHUB_TOKEN not in request.prompt and GITHUB_TOKEN[4:20] not in request.prompt
    assert "[redacted credential]" in request.prompt and "deploy failed again" in request.prompt
    assert (request.session_key, request.sandbox, request.purpose) == ("", "read-only", "scan")


def test_a_refused_reply_leaves_the_turns_pending_and_a_good_one_consumes_them(store: Store) -> None:
    TurnLog(store).add("that answer was wrong", "wrong again")
    model = Model("Sure! " + reply(observation()), reply(observation(evidence_refs=["turn:1", "turn:2"])))
    scan = scanner(store, model)
    (failed,) = scan.scan(Scan(source="feedback")).scans
    assert failed.outcome == "failed" and "not a JSON array" in failed.error and failed.pending == 2
    assert scan.tables.checkpoint(EvidenceSource.FEEDBACK) == 0 and scan.tables.signals(None, 10) == []
    (completed,) = scan.scan(Scan(source="feedback")).scans
    assert completed.outcome == "completed" and completed.pending == 0 and len(completed.signals) == 1
    assert "turn:1" in model.requests[1].prompt  # the same turns, sent again
    assert scan.tables.checkpoint(EvidenceSource.FEEDBACK) == 2
    history = scan.tables.history(10)
    assert [(r.outcome, r.refs) for r in history] == [("completed", ("turn:1", "turn:2")),
                                                      ("failed", ("turn:1", "turn:2"))]


def test_nothing_new_calls_no_model_and_a_rescan_duplicates_no_signal(store: Store) -> None:
    log = TurnLog(store)
    log.add("too slow")
    model = Model(reply(observation()), reply(observation(evidence_refs=["turn:1"])))
    scan = scanner(store, model)
    scan.scan(Scan(source="feedback"))
    assert [s.outcome for s in scan.scan(Scan(source="feedback")).scans] == ["nothing-new"]
    assert len(model.requests) == 1
    assert len(scan.tables.signals(None, 10)) == 1


def test_a_scan_takes_one_batch_per_request_and_says_how_many_are_pending(store: Store) -> None:
    TurnLog(store).add(*[f"turn {n}" for n in range(5)])
    model = Model(*["[]"] * 3)
    scan = scanner(store, model, batch=2)
    batches = [scan.scan(Scan(source="feedback")).scans for _ in range(4)]
    assert [[(s.outcome, s.records, s.pending) for s in found] for found in batches] == [
        [("completed", 2, 3)], [("completed", 2, 1)], [("completed", 1, 0)], [("nothing-new", 0, 0)]]
    assert len(model.requests) == 3


def test_a_scheduled_scan_waits_for_a_full_batch(store: Store) -> None:
    TurnLog(store).add("one", "two")
    model = Model("[]")
    (skipped,) = scanner(store, model, batch=3).scan(Scan(source="feedback", scheduled=True)).scans
    assert skipped.outcome == "skipped" and "batch of 3" in skipped.error and model.requests == []


# -- the task queue's changed tasks, read by cursor ----------------------------------


def test_changed_since_pages_tasks_by_their_events_with_every_event_of_each(tmp_path: Path) -> None:
    from enact.messages.tasks import Submit, Submitted
    from enact.tasks.queue import TaskQueue
    from enact.tasks.tables import DATABASES as TASK_DATABASES

    storage = Storage(tmp_path / "tasks")
    try:
        queue = TaskQueue(storage.grant("tasks", TASK_DATABASES), default_repo="/repo", lease_ttl_s=60)
        for text in ("first", "second", "third"):
            assert isinstance(queue.submit(Submit(request=text, origin="human-cli"), 1.0), Submitted)
        queue.cancel(1, 2.0)  # task 1 changes again, after the others
        page = queue.changed_since(0, 2)
        assert [snapshot.task.id for snapshot in page.tasks] == [2, 1]  # by each one's latest event
        assert [e.event.kind.value for e in page.tasks[1].events] == ["queued", "cancelled"]
        assert page.more and page.next_cursor == 2
        rest = queue.changed_since(page.next_cursor, 2)
        assert [snapshot.task.id for snapshot in rest.tasks] == [3, 1] and not rest.more
        assert queue.changed_since(rest.next_cursor, 2).tasks == ()
    finally:
        storage.close()


def test_a_changed_task_with_more_events_than_a_page_shows_its_newest_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from enact.messages.tasks import Submit, Submitted
    from enact.tasks import queue as task_queue
    from enact.tasks.tables import DATABASES as TASK_DATABASES

    monkeypatch.setattr(task_queue, "MAX_PAGE", 1)  # a page holds one event: the oldest was taken before
    storage = Storage(tmp_path / "tasks")
    try:
        queue = task_queue.TaskQueue(storage.grant("tasks", TASK_DATABASES), default_repo="/repo", lease_ttl_s=60)
        for text in ("first", "second"):
            assert isinstance(queue.submit(Submit(request=text, origin="human-cli"), 1.0), Submitted)
        queue.cancel(1, 2.0)
        [snapshot] = queue.changed_since(0, 1).tasks
        assert snapshot.task.id == 1
        assert [(e.cursor, e.event.kind.value) for e in snapshot.events] == [(3, "cancelled")]
    finally:
        storage.close()


def test_linking_is_idempotent_and_never_revives_a_dismissed_signal(store: Store) -> None:
    TurnLog(store).add("too slow", "too long")
    answer = reply(observation(), observation(observation="replies are too long", evidence_refs=["turn:2"]))
    scan = scanner(store, Model(answer))
    first, second = scan.scan(Scan(source="feedback")).scans[0].signals
    tables = scan.tables
    assert tables.set_state([second], SignalState.DISMISSED, 2.0) == [second]
    assert tables.link([first, second, "sig-unknown"], "cand-1", 3.0) == [first]
    assert tables.link([first], "cand-1", 4.0) == [first]
    states = {signal.id: (signal.state, signal.candidate_id) for signal in tables.signals(None, 10)}
    assert states == {first: (SignalState.LINKED, "cand-1"), second: (SignalState.DISMISSED, "")}
    assert tables.counts()[SignalState.LINKED] == 1


def test_the_signal_counts_are_kept_by_each_write_and_read_from_the_store_only_once(store: Store) -> None:
    TurnLog(store).add("too slow", "too long")
    answer = reply(observation(), observation(observation="replies are too long", evidence_refs=["turn:2"]))
    scan = scanner(store, Model(answer))
    first, second = scan.scan(Scan(source="feedback")).scans[0].signals
    tables = scan.tables
    assert tables.counts()[SignalState.ACTIVE] == 2
    tables.link([first], "cand-1", 2.0)
    tables.set_state([second], SignalState.DISMISSED, 3.0)
    tables.set_state([second], SignalState.DISMISSED, 4.0)  # no change: counted once
    expected = {**dict.fromkeys(SignalState, 0), SignalState.LINKED: 1, SignalState.DISMISSED: 1}
    assert tables.counts() == expected
    assert ScanTables(store).counts() == expected  # a restart counts what is stored
    # Counting does not read the signals again: a signal written behind the tables' back is not seen.
    store.write(lambda txn: txn.put(b"sig-behind", txn.get(first.encode(), db=store.handle("evolution.signals")),
                                    db=store.handle("evolution.signals")))
    assert tables.counts() == expected


def test_signals_are_looked_up_by_id_whatever_their_age_unknown_ids_skipped(store: Store) -> None:
    TurnLog(store).add("too slow", "too long")
    answer = reply(observation(), observation(observation="replies are too long", evidence_refs=["turn:2"]))
    scan = scanner(store, Model(answer))
    first, second = scan.scan(Scan(source="feedback")).scans[0].signals
    found = scan.tables.signals_by_id([second, "sig-unknown", first, second])
    assert [signal.id for signal in found] == [second, first]
    assert Signals(ids=(first,)).limit == 100 and Signals().ids == ()


def test_a_fenced_scanner_calls_no_model_and_moves_no_checkpoint(store: Store) -> None:
    TurnLog(store).add("too slow", "too long")
    model = Model(reply(observation()))
    fenced = Scanning(Scanner(ScanTables(store), Reader(TurnLog(store)), model, batch=20, timeout_s=5,
                              off_thread=run_inline, current=lambda: False))
    (summary,) = fenced.scan(Scan(source="feedback")).scans
    assert summary.outcome == "skipped" and "fenced" in summary.error
    assert model.requests == [] and fenced.tables.checkpoint(EvidenceSource.FEEDBACK) == 0


def test_signals_list_the_oldest_first_when_asked_as_synthesis_takes_them(store: Store) -> None:
    TurnLog(store).add("too slow", "too long")
    answer = reply(observation(), observation(observation="replies are too long", evidence_refs=["turn:2"]))
    scan = scanner(store, Model(answer))
    scan.scan(Scan(source="feedback"))
    newest_first = [signal.id for signal in scan.tables.signals(SignalState.ACTIVE, 10)]
    oldest_first = [signal.id for signal in scan.tables.signals(SignalState.ACTIVE, 10, oldest_first=True)]
    assert oldest_first == newest_first[::-1] and len(oldest_first) == 2
    assert scan.tables.signals(SignalState.ACTIVE, 1, oldest_first=True)[0].id == oldest_first[0]
