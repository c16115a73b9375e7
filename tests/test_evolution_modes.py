"""Evolve modes, the evolve schedule and brainstorm validation as plain rules
(enact.evolution.modes, .schedule, .brainstorm), driven by an explicit clock
and an explicit time zone without daylight saving time."""

from __future__ import annotations

import datetime

import orjson
import pytest

from enact.claimed_clock import RETRIES, ClaimState, Decision, nest_flat_claim
from enact.evolution import brainstorm
from enact.evolution import schedule as clock_rules
from enact.evolution.modes import EvolveMode, parse_mode
from enact.evolution.schedule import acknowledge, claim, decide, follow, run_failed, upcoming
from enact.schedules import ScheduleError, latest_due, next_due
from enact.schedules import parse as parse_schedule

TOKYO = datetime.timezone(datetime.timedelta(hours=9))  # no daylight saving time
START = datetime.datetime(2026, 3, 10, 12, 0, tzinfo=TOKYO).timestamp()  # a Tuesday, noon in TOKYO


def at(day: int, hour: int, minute: int = 0) -> float:
    return datetime.datetime(2026, 3, day, hour, minute, tzinfo=TOKYO).timestamp()


# -- modes and parsing -------------------------------------------------------


def test_modes_parse_their_names_and_say_what_they_allow() -> None:
    assert parse_mode(" Co-Evolve ") is EvolveMode.CO_EVOLVE
    assert not EvolveMode.DISABLED.scans and EvolveMode.CO_EVOLVE.scans and not EvolveMode.CO_EVOLVE.brainstorms
    assert EvolveMode.AUTO_EVOLVE.brainstorms
    with pytest.raises(ScheduleError, match="unknown evolve mode 'sometimes'; one of disabled, co-evolve"):
        parse_mode("sometimes")


@pytest.mark.parametrize(("text", "spec", "interval"), [
    ("every 6h", "every 6h", 21_600), ("Every  30m", "every 30m", 1_800), ("every 2s", "every 2s", 2),
    ("daily 9:05", "daily 09:05", 0), ("daily 09:00", "daily 09:00", 0),
    # The one grammar cron has too: days, up to 366 of them, and cron expressions.
    ("every 1D", "every 1d", 86_400), ("every 200h", "every 200h", 720_000), ("0  9 * * 1-5", "0 9 * * 1-5", 0),
])
def test_schedules_parse_to_a_normalised_spec(text: str, spec: str, interval: int) -> None:
    parsed = parse_schedule(text)
    assert parsed.spec == spec and parsed.interval_s == interval


@pytest.mark.parametrize(("text", "why"), [
    ("", "a schedule is 'every 30m', 'every 6h', 'every 1d', 'daily 09:00' \\(local time\\) or a cron expression"),
    ("hourly", "a schedule is"),
    ("every 6 hours", "an interval is 'every N' with a unit s, m, h or d"),
    ("every 0m", "between 1 s and 366 days"),
    ("every 367d", "between 1 s and 366 days"),
    ("daily 24:00", "a daily time is HH:MM from 00:00 to 23:59"),
    ("daily 9", "a schedule is"),
    ("0 9 * *", "a schedule is"),
])
def test_a_bad_schedule_is_refused_in_one_line(text: str, why: str) -> None:
    with pytest.raises(ScheduleError, match=why) as caught:
        parse_schedule(text)
    assert "\n" not in str(caught.value)


# -- due times ----------------------------------------------------------------


def test_an_interval_is_due_each_whole_interval_from_its_anchor() -> None:
    every = parse_schedule("every 6h")
    assert next_due(every, START, anchor=START) == START + 21_600
    assert next_due(every, START + 21_600, anchor=START) == START + 43_200
    assert latest_due(every, START + 21_599, since=START, anchor=START) is None
    assert latest_due(every, START + 50_000, since=START, anchor=START) == START + 43_200


def test_a_daily_time_is_due_today_if_still_ahead_else_tomorrow_in_local_time() -> None:
    nine = parse_schedule("daily 09:00")
    assert next_due(nine, at(10, 8, 59), anchor=0, tz=TOKYO) == at(10, 9)
    assert next_due(nine, at(10, 9), anchor=0, tz=TOKYO) == at(11, 9)
    assert next_due(nine, at(10, 23, 59), anchor=0, tz=TOKYO) == at(11, 9)
    # Month end: 31 March, then 1 April.
    assert next_due(nine, at(31, 10), anchor=0, tz=TOKYO) == datetime.datetime(
        2026, 4, 1, 9, tzinfo=TOKYO).timestamp()
    assert latest_due(nine, at(12, 8), since=at(10, 10), anchor=0, tz=TOKYO) == at(11, 9)
    assert latest_due(nine, at(11, 8), since=at(10, 10), anchor=0, tz=TOKYO) is None


def test_a_cron_expression_is_due_at_its_matching_minutes_in_the_zone_given() -> None:
    weekdays = parse_schedule("0 9 * * 1-5")
    # START is Tuesday 10 March, noon: Wednesday 09:00 is next, and a run
    # missed from Friday to Monday morning coalesces into Monday 09:00.
    assert next_due(weekdays, START, anchor=START, tz=TOKYO) == at(11, 9)
    assert latest_due(weekdays, at(16, 8), since=at(13, 10), anchor=START, tz=TOKYO) is None
    assert latest_due(weekdays, at(16, 10), since=at(12, 10), anchor=START, tz=TOKYO) == at(16, 9)
    done = acknowledge(claim(follow(None, weekdays, START), at(16, 9)), at(16, 9), at(16, 9, 1), "ok", weekdays,
                       tz=TOKYO)
    assert done.coalesced == 3  # Wednesday, Thursday and Friday never ran: they coalesced into Monday


# -- claim and acknowledgement -----------------------------------------------


def test_a_fresh_clock_runs_nothing_until_its_first_due_time() -> None:
    nine = parse_schedule("daily 09:00")
    clock = follow(None, nine, START)
    assert decide(clock, nine, at(11, 8, 59), tz=TOKYO).decision is Decision.NOTHING_DUE
    step = decide(clock, nine, at(11, 9), tz=TOKYO)
    assert step.decision is Decision.CLAIM and step.due == at(11, 9)
    assert clock_rules.run_id(at(11, 9)) == f"evolve:{int(at(11, 9))}"


def test_a_claimed_run_is_acknowledged_once_and_not_run_again() -> None:
    nine = parse_schedule("daily 09:00")
    clock = claim(follow(None, nine, START), at(11, 9))
    assert clock.claim.claimed == at(11, 9) and clock.claim.attempts == 1
    done = acknowledge(clock, at(11, 9), at(11, 9, 1), "scanned, nothing new", nine, tz=TOKYO)
    assert done.claim.claimed is None and done.acknowledged == at(11, 9) and done.last_run_at == at(11, 9, 1)
    assert done.last_outcome == "scanned, nothing new"
    assert decide(done, nine, at(11, 20), tz=TOKYO).decision is Decision.NOTHING_DUE
    assert upcoming(done, nine, at(11, 20), tz=TOKYO) == at(12, 9)


def test_a_claim_left_unacknowledged_is_resumed_and_given_up_after_the_attempts() -> None:
    every = parse_schedule("every 1h")
    clock = claim(follow(None, every, START), START + 3_600)  # the daemon died during the run
    step = decide(clock, every, START + 3_700)
    assert step.decision is Decision.RERUN and step.due == START + 3_600
    for _ in range(RETRIES.attempts - 1):
        clock = claim(clock, START + 3_600)
    assert clock.claim.attempts == RETRIES.attempts
    given_up = decide(clock, every, START + 3_700)
    assert given_up.decision is Decision.GIVE_UP and given_up.due == START + 3_600
    assert given_up.reason == (f"given up after {RETRIES.attempts} attempts: "
                               "did not finish (the daemon stopped during it)")
    # A later due time replaces an old claim: the two coalesce into the later run.
    later = decide(claim(follow(None, every, START), START + 3_600), every, START + 7_300)
    assert later.decision is Decision.CLAIM and later.due == START + 7_200


def test_a_run_that_keeps_failing_waits_out_the_back_off_and_is_given_up_after_the_attempts() -> None:
    every = parse_schedule("every 1h")
    clock, now = claim(follow(None, every, START), START + 3_600), START + 3_601
    for attempt in range(1, RETRIES.attempts):
        clock = run_failed(clock, now, "actor 'curator' did not answer")
        assert decide(clock, every, now + RETRIES.delay(attempt) - 1).decision is Decision.WAIT
        assert upcoming(clock, every, now) == now + RETRIES.delay(attempt)
        now += RETRIES.delay(attempt)
        assert decide(clock, every, now).decision is Decision.RERUN
        clock = claim(clock, START + 3_600)
    clock = run_failed(clock, now, "actor 'curator' did not answer")
    step = decide(clock, every, now)
    assert step.decision is Decision.GIVE_UP and step.reason.endswith("attempts: actor 'curator' did not answer")
    done = acknowledge(clock, START + 3_600, now, f"failed: {step.reason}", every)
    assert done.claim.claimed is None and done.claim.retry_at is None and done.acknowledged == START + 3_600
    assert decide(done, every, START + 7_200).decision is Decision.CLAIM


def test_an_evolve_clock_stored_before_retries_reads_with_no_back_off() -> None:
    from enact.evolution.schedule import EvolveClock
    from enact.storage._records import decode_record

    old = {"spec": "every 1h", "anchor": START, "acknowledged": None, "claimed": START + 3_600, "attempts": 2,
           "last_run_at": None, "last_outcome": "", "coalesced": 0}
    read = decode_record(EvolveClock, nest_flat_claim(old), database="scheduler.evolve", key=b"clock")
    assert read.claim == ClaimState(claimed=START + 3_600, attempts=2)
    assert decide(read, parse_schedule("every 1h"), START + 3_700).decision is Decision.RERUN


def test_due_times_missed_while_down_coalesce_into_one_run() -> None:
    every = parse_schedule("every 30m")
    clock = follow(None, every, START)
    step = decide(clock, every, START + 10 * 1_800 + 5)
    assert step.due == START + 10 * 1_800
    done = acknowledge(claim(clock, step.due or 0), step.due or 0, START + 10 * 1_800 + 6, "ok", every)
    assert done.coalesced == 9
    assert decide(done, every, START + 10 * 1_800 + 7).decision is Decision.NOTHING_DUE
    nine = parse_schedule("daily 09:00")
    daily = follow(None, nine, at(10, 10))
    missed = decide(daily, nine, at(14, 12), tz=TOKYO)
    assert missed.due == at(14, 9)
    assert acknowledge(claim(daily, at(14, 9)), at(14, 9), at(14, 12), "ok", nine, tz=TOKYO).coalesced == 3


def test_a_changed_schedule_starts_a_new_anchor_and_keeps_the_last_run() -> None:
    every, nine = parse_schedule("every 1h"), parse_schedule("daily 09:00")
    done = acknowledge(claim(follow(None, every, START), START + 3_600), START + 3_600, START + 3_601, "ok", every)
    moved = follow(done, nine, START + 4_000)
    assert moved.spec == "daily 09:00" and moved.anchor == START + 4_000 and moved.acknowledged is None
    assert moved.last_run_at == START + 3_601
    assert follow(moved, nine, START + 9_000) is moved


# -- brainstorm validation, dedupe and the 24 h limit --------------------------


def idea(title: str, **overrides: object) -> dict[str, object]:
    item: dict[str, object] = {"evidence_ids": [], "title": title, "rationale": "the theme asks for it",
                               "proposed_change": "number the steps in long replies", "expected_benefit": "clarity",
                               "risk": "none much", "test_plan": "a reply-format test"}
    item.update(overrides)
    return item


def reply(*items: object) -> str:
    return orjson.dumps(list(items)).decode()


def test_a_brainstorm_reply_of_up_to_three_ideas_parses() -> None:
    ideas = brainstorm.parse(reply(idea("Number the steps"), idea("Summaries first")))
    assert [found.title for found in ideas] == ["Number the steps", "Summaries first"]
    assert brainstorm.parse("[]") == ()


@pytest.mark.parametrize(("text", "why"), [
    ("Here you go: []", "not a JSON array"),
    ('{"title": "x"}', "not a JSON array"),
    (reply(idea("a"), idea("b"), idea("c"), idea("d")), "has 4 candidates; at most 3"),
    (reply({k: v for k, v in idea("a").items() if k != "risk"}), "brainstorm candidate 1 lacks risk"),
    (reply(idea("a", extra="x")), "not allowed: extra"),
    (reply(idea("a", evidence_ids=["sig-1"])), "evidence_ids must be empty"),
    (reply(idea("a", rationale="x" * 1_201)), "rationale has 1201 characters; at most 1200"),
    (reply(idea("a", test_plan="  ")), "test_plan must be a non-empty string"),
])
def test_an_invalid_brainstorm_reply_is_refused_as_a_whole(text: str, why: str) -> None:
    with pytest.raises(brainstorm.BrainstormError, match=why):
        brainstorm.parse(text)


def test_brainstormed_ideas_repeating_a_candidate_or_each_other_are_dropped() -> None:
    ideas = brainstorm.parse(reply(idea("Summaries first"), idea("summaries  FIRST."), idea("Keep replies short!")))
    kept = brainstorm.fresh(ideas, ["keep replies short", "Number the steps"])
    assert [found.title for found in kept] == ["Summaries first"]


def test_a_theme_is_brainstormed_at_most_once_a_day() -> None:
    assert brainstorm.allowed(None, START)
    assert not brainstorm.allowed(START, START + 24 * 3_600 - 1)
    assert brainstorm.allowed(START, START + 24 * 3_600)
    assert brainstorm.theme_key("Make replies  easier.") == brainstorm.theme_key("make replies easier")
    assert brainstorm.theme_key("make replies easier") != brainstorm.theme_key("faster tasks")


def test_the_brainstorm_prompt_names_the_theme_and_what_exists_and_redacts_credentials() -> None:
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    text = brainstorm.prompt(f"faster replies {token}", ["Keep replies short (active)"],
                             ["task 3 succeeded: tidy the docs — done"])
    assert text.startswith(brainstorm.PROMPT_HEADING) and "Theme: faster replies" in text
    assert "- Keep replies short (active)" in text and "- task 3 succeeded: tidy the docs" in text
    assert token not in text


def test_the_report_goes_to_report_to_else_the_locked_conversation_else_nowhere() -> None:
    from enact.evolution.runs import ReportTarget, report_target

    assert report_target("telegram:42", ["local:owner"]) == ReportTarget(channel="telegram", conversation="42")
    assert report_target("", ["owner", "local:owner"]) == ReportTarget(channel="local", conversation="owner")
    assert report_target("", ["owner"]) is None and report_target("", []) is None


def test_a_run_proposes_only_for_new_signals_no_open_proposal_or_a_candidate_newer_than_it() -> None:
    # Thirty active candidates: more than a proposal shows, all older than the open proposal.
    older = [START - n for n in range(30)]
    assert not clock_rules.proposal_needed(found_signals=False, active_created_at=older, open_proposal_at=START)
    assert clock_rules.proposal_needed(found_signals=True, active_created_at=older, open_proposal_at=START)
    assert clock_rules.proposal_needed(found_signals=False, active_created_at=older, open_proposal_at=None)
    assert clock_rules.proposal_needed(found_signals=False, active_created_at=[*older, START + 1],
                                       open_proposal_at=START)
    assert not clock_rules.proposal_needed(found_signals=False, active_created_at=[], open_proposal_at=None)


def test_a_credential_cut_by_the_clip_is_redacted_before_it_is_clipped() -> None:
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    # The clip keeps the token's first part only, too short to look like one.
    summary = "x" * (brainstorm._SUMMARY_CHARS - 25) + " " + token
    text = brainstorm.prompt("clarity", [summary], [summary])
    assert token[:20] not in text and "[redacted" in text
