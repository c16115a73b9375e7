"""The curator's plain logic, without threads: synthesis validation, the
guard, ranking, curation and its fallback, removal suggestions."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from enact.evolution import approval, curation, guard, ranking, synthesis
from enact.evolution.candidates import Candidate, CandidateState, Draft, RemovalClass, candidate_id
from enact.evolution.signals import EvidenceSource, Signal, SignalState
from enact.messages.curator import RemovalSuggestion
from enact.storage import Storage
from enact.tasks.records import MAX_BRIEF, Phase, Task, TaskState

NOW = 1_800_000_000.0


def signal(number: int, source: str = "feedback", *, confidence: float = 0.8, explicit: bool = True,
           age_s: float = 0.0, linked: str = "") -> Signal:
    return Signal(id=f"sig-{number:012d}", source=EvidenceSource(source), observation=f"observation {number}",
                  evidence_type="complaint", affected_area="replies", desired_outcome="shorter replies",
                  confidence=confidence, explicit=explicit, evidence_refs=(f"turn:{number}",),
                  state=SignalState.LINKED if linked else SignalState.ACTIVE, scan_id="scan-1",
                  candidate_id=linked, created_at=NOW - age_s, updated_at=NOW - age_s)


def item(*evidence: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "evidence_ids": list(evidence), "title": "Keep replies short", "rationale": "the owner asked twice",
        "proposed_change": "cap the reply length in the conversation prompt", "expected_benefit": "less scrolling",
        "risk": "answers lose detail", "test_plan": "a chat test checks a long answer is summarised",
    }
    return {**base, **fields}


def answer(*items: dict[str, Any]) -> str:
    return orjson.dumps(list(items)).decode()


SIGNALS = {s.id: s for s in (signal(1), signal(2), signal(3, "experience"))}


def test_a_valid_batch_becomes_drafts_with_one_source_and_content_derived_ids() -> None:
    [draft] = synthesis.parse(answer(item("sig-000000000002", "sig-000000000001")), SIGNALS)
    assert draft.source == "feedback"
    assert draft.evidence_ids == ("sig-000000000001", "sig-000000000002")
    assert draft.id == candidate_id("feedback", ["sig-000000000002", "sig-000000000001"], "  keep REPLIES short.")
    made = synthesis.candidate(draft, SIGNALS, NOW)
    assert (made.id, made.state, made.created_at) == (draft.id, CandidateState.ACTIVE, NOW)
    assert synthesis.parse("[]", SIGNALS) == []


@pytest.mark.parametrize(("reply", "why"), [
    ("Here you go: " + answer(item("sig-000000000001")), "not a JSON array"),
    ("[{\"title\": ", "not a JSON array"),
    (orjson.dumps(item("sig-000000000001")).decode(), "not a JSON array"),
    (answer(*[item("sig-000000000001", title=f"t{n}") for n in range(6)]), "at most 5"),
    (answer({k: v for k, v in item("sig-000000000001").items() if k != "risk"}), "lacks risk"),
    (answer({**item("sig-000000000001"), "priority": "high"}), "not allowed: priority"),
    (answer(item()), "non-empty list of signal ids"),
    (answer(item("sig-999999999999")), "not a signal it was shown"),
    (answer(item("sig-000000000001", "sig-000000000003")), "more than one source"),
    (answer(item("sig-000000000001", rationale="x" * 1201)), "at most 1200"),
    (answer(item("sig-000000000001", title="  ")), "title must be a non-empty string"),
    (answer(item("sig-000000000001", test_plan=3)), "test_plan must be a non-empty string"),
])
def test_an_invalid_batch_is_rejected_whole_and_says_why(reply: str, why: str) -> None:
    with pytest.raises(synthesis.SynthesisError, match=why):
        synthesis.parse(reply, SIGNALS)


@pytest.mark.parametrize(("field", "text", "area"), [
    ("title", "Rewrite the agent's identity to sound friendlier", "identity"),
    ("proposed_change", "adjust the mission to include sales", "mission"),
    ("proposed_change", "store the API key in the config for speed", "credentials"),
    ("title", "Widen the sandbox for tasks", "permissions"),
    ("proposed_change", "merge reviews automatically once tests pass", "merging"),
    ("title", "Deploy each adopted change", "deploying"),
    ("proposed_change", "let the curator approve its own proposals", "the daemon's own authority"),
    ("proposed_change", "delete all old turns to save space", "destructive"),
])
def test_a_candidate_touching_human_controlled_scope_rejects_the_whole_batch_naming_why(
        field: str, text: str, area: str) -> None:
    batch = answer(item("sig-000000000001", title="A fine one"), item("sig-000000000002", **{field: text}))
    with pytest.raises(synthesis.SynthesisError) as raised:
        synthesis.parse(batch, SIGNALS)
    message = str(raised.value)
    assert "candidate 2" in message and area in message and "whole batch is rejected" in message


def test_the_guard_passes_ordinary_improvements_and_ignores_what_the_rationale_quotes() -> None:
    assert guard.refusal({"title": "Ask before very long replies", "proposed_change": "add a length check"}) == ""
    assert guard.refusal({"title": "Keep replies short", "proposed_change": "cap length",
                          "rationale": "the owner said: never deploy on Fridays"}) == ""


def test_pending_signals_are_the_unlinked_ones_oldest_first_at_most_one_hundred() -> None:
    many = [signal(n, age_s=n) for n in range(150)] + [signal(900, linked="cand-x")]
    chosen = synthesis.pending(many)
    assert len(chosen) == synthesis.MAX_SIGNALS
    assert chosen[0].id == "sig-000000000149" and all(s.candidate_id == "" for s in chosen)


def test_signals_a_stored_candidate_draws_on_are_claimed_for_it_after_a_crash() -> None:
    stored = make_candidate("cand-aaaaaaaaaaaa", evidence=("sig-000000000001", "sig-000000000002"))
    claimed = synthesis.claimed([stored], [signal(1), signal(2), signal(3, "experience"),
                                           signal(4, linked="cand-other")])
    assert claimed == {"cand-aaaaaaaaaaaa": ("sig-000000000001", "sig-000000000002")}


def make_candidate(cid: str, *, source: str = "feedback", score: float = 0.5, created_at: float = NOW,
                   evidence: tuple[str, ...] = ("sig-000000000001",), state: CandidateState = CandidateState.ACTIVE,
                   **fields: Any) -> Candidate:
    base: dict[str, Any] = {
        "title": f"title of {cid}", "rationale": "because", "proposed_change": "a small change",
        "expected_benefit": "better", "risk": "low", "test_plan": "a test",
    }
    drafted = {**base, **{name: value for name, value in fields.items() if name in base}}
    rest = {name: value for name, value in fields.items() if name not in base}
    draft = Draft(source=source, evidence_ids=evidence, **drafted)
    return Candidate(id=cid, draft=draft, state=state, score=score, created_at=created_at, updated_at=created_at,
                     **rest)


def test_the_score_rises_with_evidence_confidence_explicitness_and_recency_and_is_deterministic() -> None:
    one = ranking.score("feedback", [signal(1)], NOW)
    assert ranking.score("feedback", [signal(1)], NOW) == one
    assert ranking.score("feedback", [signal(1), signal(2)], NOW) > one
    assert ranking.score("feedback", [signal(1, confidence=0.3)], NOW) < one
    assert ranking.score("feedback", [signal(1, explicit=False)], NOW) < one
    assert ranking.score("feedback", [signal(1, age_s=30 * 86400)], NOW) < one
    assert ranking.score("experience", [signal(1)], NOW) < one
    assert ranking.score("feedback", [], NOW) < ranking.score("feedback", [signal(1, confidence=0.0,
                                                                                  explicit=False)], NOW)


def test_ranking_orders_by_score_then_newest_then_id_whatever_the_input_order() -> None:
    a = make_candidate("cand-a", score=0.7)
    b = make_candidate("cand-b", score=0.9)
    c = make_candidate("cand-c", score=0.7, created_at=NOW + 1)
    d = make_candidate("cand-d", score=0.7)
    expected = ["cand-b", "cand-c", "cand-a", "cand-d"]
    assert [x.id for x in ranking.ranked([a, b, c, d])] == expected
    assert [x.id for x in ranking.ranked([d, c, b, a])] == expected


def test_what_is_shown_keeps_a_place_for_each_source() -> None:
    feedback = [make_candidate(f"cand-f{n}", score=0.9 - n / 100) for n in range(30)]
    experience = make_candidate("cand-e", source="experience", score=0.1)
    shown = ranking.diverse([*feedback, experience], 24)
    assert len(shown) == 24 and shown[-1].id == "cand-e"
    assert [c.id for c in shown[:23]] == [f"cand-f{n}" for n in range(23)]
    assert [c.id for c in curation.shown([*feedback, experience])] == [c.id for c in shown]


def task(task_id: int, state: TaskState, *, finished_at: float, parent: int | None = None, key: str = "",
         summary: str = "") -> Task:
    return Task(id=task_id, request=f"work {task_id}", brief="", repo="/r", origin="human-cli",
                idempotency_key=key or f"fresh:{task_id}", repairs=2, deadline_s=600, attempt=1, parent=parent,
                state=state, phase=Phase.NONE, repair=0, confined=None, review_id="", worktree="",
                conversation=None, worker="", lease_expires_at=None, cancel_requested=False, not_before=0.0,
                failure_class=None, summary=summary, created_at=finished_at - 10, updated_at=finished_at,
                started_at=None, finished_at=finished_at)


def test_completion_records_keep_the_latest_outcome_per_task_a_later_failure_replacing_a_success() -> None:
    records = curation.completion_records([
        task(1, TaskState.SUCCEEDED, finished_at=NOW - 50, key="evolve:cand-a"),
        task(2, TaskState.FAILED, finished_at=NOW - 10, key="evolve:cand-a"),
        task(3, TaskState.FAILED, finished_at=NOW - 40),
        task(4, TaskState.SUCCEEDED, finished_at=NOW - 30, parent=3),
        task(5, TaskState.SUCCEEDED, finished_at=NOW - 20),
    ], landed={4, 5})
    assert [(r.ref, r.state, r.landed) for r in records] == [
        ("task:2", "failed", False), ("task:5", "succeeded", True), ("task:4", "succeeded", True)]
    assert records[0].candidate_id == "cand-a"
    many = curation.completion_records([task(n, TaskState.SUCCEEDED, finished_at=NOW + n) for n in range(1, 30)],
                                       landed=set())
    assert len(many) == curation.MAX_RECORDS and many[0].task_id == 29


SHOWN = [make_candidate("cand-a", score=0.9), make_candidate("cand-b", score=0.8),
         make_candidate("cand-c", score=0.1, title="x" * 1000)]
RECORDS = curation.completion_records([task(7, TaskState.SUCCEEDED, finished_at=NOW),
                                       task(8, TaskState.SUCCEEDED, finished_at=NOW - 1)], landed={7})


def curated(**fields: Any) -> str:
    base: dict[str, Any] = {"recommended": "cand-a", "reason": "most evidence", "guidance": "keep it small",
                            "removals": []}
    return orjson.dumps({**base, **fields}).decode()


def removal(candidate: str, kind: str, *refs: str) -> dict[str, Any]:
    return {"candidate_id": candidate, "class": kind, "reason": "see refs", "refs": list(refs)}


def test_a_valid_curation_names_a_shown_candidate_and_its_removal_suggestions() -> None:
    verdict = curation.parse(curated(removals=[removal("cand-b", "duplicate", "cand-a"),
                                               removal("cand-c", "already-resolved", "task:7")]), SHOWN, RECORDS)
    assert (verdict.recommended, verdict.fallback, verdict.guidance) == ("cand-a", False, "keep it small")
    assert [(s.candidate_id, s.removal_class) for s in verdict.removals] == [
        ("cand-b", RemovalClass.DUPLICATE), ("cand-c", RemovalClass.ALREADY_RESOLVED)]
    assert curation.parse(curated(recommended=None), SHOWN, RECORDS).recommended is None


@pytest.mark.parametrize(("reply", "why"), [
    ("I recommend cand-a", "not one JSON object"),
    ("[" + curated() + "]", "not a JSON object"),
    (curated() + curated(), "not one JSON object"),
    (curated(extra=1), "not allowed: extra"),
    ('{"recommended": "cand-a", "reason": "r", "guidance": ""}', "lacks removals"),
    (curated(recommended="cand-zzz"), "not a candidate it was shown"),
    (curated(reason=""), "reason must be a non-empty string"),
    (curated(removals=[removal("cand-a", "obsolete")]), "both recommended and suggested for removal"),
    (curated(removals=[removal("cand-b", "stale")]), "is not one of"),
    (curated(removals=[removal("cand-b", "duplicate", "cand-nope")]), "neither a candidate nor a task"),
    (curated(removals=[removal("cand-b", "already-resolved", "task:8")]), "needs a task ref whose review landed"),
    (curated(removals=[removal("cand-b", "already-resolved")]), "needs a task ref whose review landed"),
    (curated(removals=[removal("cand-b", "obsolete"), removal("cand-b", "duplicate", "cand-a")]), "twice"),
    (curated(removals=[{"candidate_id": "cand-b", "class": "obsolete", "reason": "r"}]), "lacks refs"),
])
def test_an_invalid_curation_is_refused_with_the_reason(reply: str, why: str) -> None:
    with pytest.raises(curation.CurationError, match=why):
        curation.parse(reply, SHOWN, RECORDS)


def test_the_fallback_takes_the_top_ranked_safe_active_candidate_and_says_it_is_one() -> None:
    unsafe = make_candidate("cand-u", score=0.99, proposed_change="merge the branch into main", brainstorm=True)
    done = make_candidate("cand-d", score=0.95, state=CandidateState.APPROVED)
    verdict = curation.fallback([*SHOWN, unsafe, done], "the model call failed: timeout")
    assert (verdict.recommended, verdict.fallback, verdict.removals) == ("cand-a", True, ())
    assert verdict.reason.startswith("curation failed (the model call failed: timeout)")
    assert curation.fallback([unsafe], "bad JSON").recommended is None


def test_a_fallbacks_reason_leaves_the_word_fallback_to_its_flag() -> None:
    # Every line that shows a proposal marks a fallback from its flag ("fallback: ...", "(fallback)").
    for shown in (SHOWN, []):
        verdict = curation.fallback(shown, "bad JSON")
        assert verdict.fallback and "fallback" not in verdict.reason
        assert verdict.reason.startswith("curation failed (bad JSON): ")


def test_curation_snapshots_are_clipped_and_the_prompt_carries_candidates_and_records() -> None:
    snap = curation.snapshot(SHOWN[2])
    assert len(snap["title"]) == curation.SNAPSHOT_FIELD and snap["title"].endswith("…")
    text = curation.prompt(SHOWN, RECORDS)
    assert text.startswith(curation.PROMPT_HEADING) and '"cand-c"' in text and '"task:7"' in text


def test_a_removal_citing_a_suggestion_must_match_its_candidate_and_class() -> None:
    suggestion = RemovalSuggestion(id="prop-3-r1", candidate_id="cand-b", removal_class=RemovalClass.OBSOLETE,
                                   reason="r")
    assert curation.suggestion_mismatch(suggestion, "cand-b", "") == ""
    assert curation.suggestion_mismatch(suggestion, "cand-b", "obsolete") == ""
    assert "about cand-b, not cand-a" in curation.suggestion_mismatch(suggestion, "cand-a", "")
    assert "suggests obsolete, not duplicate" in curation.suggestion_mismatch(suggestion, "cand-b", "duplicate")
    assert curation.suggestion_mismatch(None, "cand-b", "") == "no such removal suggestion"


def test_an_approved_candidate_becomes_a_review_only_task_carrying_its_context_and_provenance() -> None:
    long = make_candidate("cand-a", rationale="r" * 1200, proposed_change="c" * 1200, expected_benefit="b" * 1200,
                          risk="k" * 1200, test_plan="t" * 1200)
    request = approval.task_request(long)
    assert request.endswith("Open a review; never merge.") and approval.task_key("cand-a") == "evolve:cand-a"
    brief = approval.task_brief(long, [signal(1)])
    assert len(brief) <= MAX_BRIEF
    for label in ("Rationale:", "Change:", "Benefit:", "Risk:", "Test plan:", "Provenance:"):
        assert label in brief
    assert "sig-000000000001" in brief and "turn:1" in brief
    short = dataclasses.replace(long, draft=dataclasses.replace(long.draft, rationale="the owner asked twice"))
    assert "Rationale: the owner asked twice" in approval.task_brief(short, [])


class _AlwaysCurrent:
    def is_current(self) -> bool:
        return True


def test_a_model_action_may_list_and_show_candidates_but_never_approve_or_remove() -> None:
    from enact.cancellation import CancellationToken
    from enact.commands import CommandCall, CommandContext, CommandRegistry
    from enact.evolution.commands import evolve_commands
    from enact.messages.common import MODEL_ACTION

    registry = CommandRegistry()
    for command in evolve_commands():
        registry.register(command)
    registry.bind(CommandContext(fence=_AlwaysCurrent(), status=lambda: ""))  # type: ignore[arg-type]

    def refusal(name: str) -> str:
        args = {} if name == "evolve.candidates" else {"text": "cand-0123456789ab now"}
        call = CommandCall(name=name, args=args, origin=MODEL_ACTION,
                           event_origin="chat:local", owners=True, cancel=CancellationToken())
        refused = registry.refusal(call)
        return refused.text if refused is not None else ""

    assert refusal("evolve.candidates") == "" and refusal("evolve.show") == ""
    for name in ("evolve.approve", "evolve.remove"):
        assert refusal(name) == f"refused: {name} needs a human; a model action cannot run it"


SECRET = "ghp_" + "a1B2c3D4e5" * 4


def test_a_credential_in_a_task_or_a_signal_never_reaches_the_curation_or_synthesis_prompt() -> None:
    # The secret sits where the clip would cut it: clipping first would leave
    # a fragment too short to be recognised as a token.
    request = "x" * (curation.SNAPSHOT_FIELD - 20) + " " + SECRET
    long_task = dataclasses.replace(task(1, TaskState.FAILED, finished_at=NOW, summary=f"used {SECRET}"),
                                    request=request)
    [record] = curation.completion_records([long_task], landed=set())
    text = curation.prompt([], [record])
    assert SECRET[:12] not in text and "[redacted" in text
    leaky = dataclasses.replace(signal(1), observation=f"the owner pasted {SECRET}", desired_outcome=SECRET)
    assert SECRET not in synthesis.prompt([leaky]) and "[redacted credential]" in synthesis.prompt([leaky])


def test_a_retried_evolve_task_is_the_same_work_as_the_task_it_retries() -> None:
    first = task(1, TaskState.FAILED, finished_at=NOW - 20, key="evolve:cand-a")
    retry = task(2, TaskState.SUCCEEDED, finished_at=NOW - 10, parent=1, key="retry:1:abc")
    [record] = curation.completion_records([first, retry], landed={2})
    assert (record.ref, record.candidate_id, record.landed) == ("task:2", "cand-a", True)


def test_a_candidates_audit_is_read_by_its_index_and_events_before_the_index_are_indexed_once(
        tmp_path: Path) -> None:
    from enact.evolution import curator_records
    from enact.evolution.curator_records import CuratorRecords, audit_event

    storage = Storage(tmp_path / "state")
    try:
        store = storage.grant("curator", curator_records.DATABASES)
        records = CuratorRecords(store)
        # Written as before the index existed: straight into the audit log.
        store.write(lambda txn: records.audit_log.append(txn, dataclasses.asdict(audit_event("old", "cand-a", at=NOW))))
        records.index_audit()
        records.put(make_candidate("cand-a"), audit_event("synthesised", "cand-a", at=NOW))
        records.put(make_candidate("cand-ab"), audit_event("synthesised", "cand-ab", at=NOW))
        records.note(audit_event("approved", "cand-a", at=NOW), audit_event("superseded", proposal_id="prop-1", at=NOW))
        assert [e.kind for e in records.candidate_events("cand-a")] == ["approved", "synthesised", "old"]
        assert [e.kind for e in records.candidate_events("cand-ab")] == ["synthesised"]
        assert records.candidate_events("cand-zz") == []
        # Only the index is read: an event in the log but not in the index is not found.
        stray = dataclasses.asdict(audit_event("stray", "cand-a", at=NOW))
        store.write(lambda txn: records.audit_log.append(txn, stray))
        records.index_audit()  # already indexed: nothing more is read
        assert [e.kind for e in records.candidate_events("cand-a")] == ["approved", "synthesised", "old"]
    finally:
        storage.close()


def test_a_score_ages_at_rank_time_so_old_evidence_falls_behind_newer() -> None:
    old = synthesis.candidate(synthesis.parse(answer(item("sig-000000000001")), SIGNALS)[0], SIGNALS, NOW)
    assert old.evidence_at == NOW and ranking.score_at(old, NOW) == old.score
    later = NOW + 2 * ranking.RECENCY_HALF_LIFE_S
    assert ranking.score_at(old, later) == pytest.approx(old.score - ranking.WEIGHTS["recency"] * 0.75, abs=1e-6)
    fresh = make_candidate("cand-new", score=old.score - 0.05, created_at=later)
    fresh = dataclasses.replace(fresh, evidence_at=later)
    assert [c.id for c in curation.shown([old, fresh], later)] == ["cand-new", old.id]
    assert [c.id for c in curation.shown([old, fresh])] == [old.id, "cand-new"]  # the stored scores
    legacy = make_candidate("cand-legacy", score=0.4)  # stored before evidence_at was kept
    assert ranking.score_at(legacy, later) == 0.4


def test_only_an_active_or_approved_candidate_claims_unlinked_signals_after_a_crash() -> None:
    evidence = ("sig-000000000001",)
    for state in (CandidateState.REMOVED, CandidateState.ADOPTED):
        gone = make_candidate("cand-gone", evidence=evidence, state=state)
        assert synthesis.claimed([gone], [signal(1)]) == {}
    approved = make_candidate("cand-kept", evidence=evidence, state=CandidateState.APPROVED)
    assert synthesis.claimed([approved], [signal(1)]) == {"cand-kept": evidence}
