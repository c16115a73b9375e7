"""Cron schedules and backlog order as plain rules (enact.tasks.scheduling),
driven by an explicit clock."""

from __future__ import annotations

import datetime

import orjson
import pytest

from enact.claimed_clock import NO_CLAIM, RETRIES, ClaimState, Decision, nest_flat_claim
from enact.schedules import ScheduleError, finer_than_a_minute
from enact.tasks.scheduling import (
    BacklogItem,
    Priority,
    Schedule,
    check_spec,
    claim,
    decide,
    failures_said,
    given_up,
    idempotency_key,
    latest_due,
    moment_said,
    next_to_promote,
    refused,
    repo_said,
    skipped_busy,
    submission_failed,
    submitted,
)

START = 1_800_000_000.0  # any fixed moment


def schedule(spec: str, **fields: object) -> Schedule:
    return Schedule(id=7, spec=check_spec(spec), request="tidy up", repo="", created_at=START, **fields)  # type: ignore[arg-type]


def run(every: Schedule, now: float, task_id: int) -> Schedule:
    """What a tick does when ``every`` is due and its previous task ended."""
    step = decide(every, now)
    assert step.decision is Decision.CLAIM and step.due is not None
    return submitted(claim(every, step.due), step.due, task_id)


def test_interval_schedule_is_due_each_whole_interval_after_it_was_added() -> None:
    every = schedule("every 10m")
    assert decide(every, START + 599).decision is Decision.NOTHING_DUE
    step = decide(every, START + 600)
    assert step.decision is Decision.CLAIM and step.due == START + 600
    assert idempotency_key(every.id, START + 600) == f"cron:7:{int(START) + 600}"
    after = run(every, START + 600, task_id=3)
    assert after.last_due == START + 600 and after.last_task == 3
    assert decide(after, START + 1199).decision is Decision.NOTHING_DUE
    assert decide(after, START + 1200).due == START + 1200


def test_cron_expression_is_due_at_its_next_matching_minute_in_local_time() -> None:
    # 09:00 on a weekday, local time: find the Monday after START.
    day = datetime.datetime.fromtimestamp(START).astimezone().replace(hour=12, minute=0, second=0, microsecond=0)
    while day.weekday() != 0:
        day += datetime.timedelta(days=1)
    created = (day - datetime.timedelta(days=3)).timestamp()  # the Friday before, at noon
    nine_monday = day.replace(hour=9).timestamp()
    weekdays = check_spec("0 9 * * 1-5")
    # Saturday and Sunday pass without a due time; Monday 09:00 is the next.
    assert latest_due(weekdays, created, nine_monday - 1) is None
    assert latest_due(weekdays, created, nine_monday) == nine_monday
    assert latest_due(weekdays, created, nine_monday + 3_600) == nine_monday


def test_a_daily_time_is_due_once_a_day_in_local_time() -> None:
    # The schedule grammar is the evolve schedule's too (enact.schedules).
    daily = schedule("Daily 9:00")
    assert daily.spec == "daily 09:00"
    noon = datetime.datetime.fromtimestamp(START).astimezone().replace(hour=12, minute=0, second=0, microsecond=0)
    nine_next_day = (noon + datetime.timedelta(days=1)).replace(hour=9).timestamp()
    assert latest_due(daily.spec, noon.timestamp(), nine_next_day - 1) is None
    assert latest_due(daily.spec, noon.timestamp(), nine_next_day + 60) == nine_next_day


def test_a_due_time_while_the_previous_task_is_unfinished_submits_nothing_and_is_skipped() -> None:
    every = run(schedule("every 1h"), START + 3_600, task_id=1)
    busy = decide(every, START + 7_200)
    assert busy.decision is Decision.CLAIM and busy.due is not None  # the actor finds task 1 unfinished
    skipped = skipped_busy(every, busy.due)
    assert skipped.last_task == 1 and skipped.skipped == 1 and skipped.last_due == START + 7_200
    assert skipped.claim == NO_CLAIM
    # Once that task has ended, the next due time submits again.
    assert decide(skipped, START + 7_300).decision is Decision.NOTHING_DUE
    assert decide(skipped, START + 10_800).decision is Decision.CLAIM


def test_runs_missed_while_down_coalesce_into_one_run_at_the_latest_due_time() -> None:
    every = schedule("every 10m")
    down_for = 6 * 3_600 + 125  # 36 due times missed
    step = decide(every, START + down_for)
    assert step.decision is Decision.CLAIM and step.due == START + 36 * 600
    after = run(every, START + down_for, task_id=9)
    assert decide(after, START + down_for).decision is Decision.NOTHING_DUE
    minutely = schedule("* * * * *")
    month = START + 31 * 86_400
    step = decide(minutely, month + 30)
    assert step.decision is Decision.CLAIM and step.due is not None and month - 30 <= step.due <= month + 30
    assert decide(run(minutely, month + 30, task_id=2), month + 30).decision is Decision.NOTHING_DUE


def test_a_claim_left_unacknowledged_by_a_crash_is_submitted_again_under_the_same_key() -> None:
    every = schedule("every 10m")
    step = decide(every, START + 600)
    assert step.decision is Decision.CLAIM and step.due is not None
    claimed = claim(every, step.due)  # committed before the task is submitted
    assert claimed.claim.claimed == START + 600 and claimed.last_due is None and claimed.claim.attempts == 1
    # The daemon dies after the submit, before the acknowledgement, and stays
    # down past two more due times: the claim comes first, not the latest.
    again = decide(claimed, START + 1_900)
    assert again.decision is Decision.RERUN and again.due == step.due
    assert idempotency_key(every.id, again.due) == idempotency_key(every.id, step.due)
    acknowledged = submitted(claim(claimed, again.due), again.due, task_id=4)
    assert acknowledged.claim == NO_CLAIM and acknowledged.last_due == START + 600 and acknowledged.last_task == 4
    # Then the due times missed meanwhile coalesce into the latest, as ever.
    later = decide(acknowledged, START + 1_900)
    assert later.decision is Decision.CLAIM and later.due == START + 1_800


def test_a_refused_submission_spends_its_claimed_due_time_keeps_the_last_task_and_the_reason_until_one_is_queued(
) -> None:
    every = schedule("every 10m", last_due=START + 600, last_task=2)
    step = decide(every, START + 1_200)
    assert step.due is not None
    said = refused(claim(every, step.due), step.due, "/gone does not exist")
    assert said.claim.claimed is None and said.last_due == START + 1_200 and said.last_task == 2
    assert said.refused == "/gone does not exist" and failures_said(said) == "refused: /gone does not exist"
    queued = submitted(claim(said, START + 1_800), START + 1_800, task_id=3)
    assert queued.refused == "" and queued.last_task == 3 and failures_said(queued) == ""


def test_a_submission_that_keeps_failing_is_retried_after_a_back_off_then_given_up_and_the_next_runs() -> None:
    every = schedule("every 1h", last_task=2)
    now = START + 3_600
    claimed = claim(every, START + 3_600)
    for attempt in range(1, RETRIES.attempts + 1):
        failed = submission_failed(claimed, now, "actor 'tasks' did not answer Submit within 5 s")
        assert failed.claim.claimed == START + 3_600 and failed.claim.retry_at == now + RETRIES.delay(attempt)
        if attempt == RETRIES.attempts:
            break
        assert decide(failed, now + RETRIES.delay(attempt) - 1).decision is Decision.WAIT
        now += RETRIES.delay(attempt)
        again = decide(failed, now)
        assert again.decision is Decision.RERUN and again.due == START + 3_600
        claimed = claim(failed, START + 3_600)
        assert claimed.claim.attempts == attempt + 1
    # Past the next due time as well: the claim is settled first, as failed.
    step = decide(failed, START + 7_300)
    assert step.decision is Decision.GIVE_UP and step.due == START + 3_600
    assert step.reason == (f"given up after {RETRIES.attempts} attempts: "
                           "actor 'tasks' did not answer Submit within 5 s")
    settled = given_up(failed, START + 3_600, step.reason)
    assert settled.claim == NO_CLAIM
    assert settled.last_due == START + 3_600 and settled.failed == 1 and settled.last_failure == step.reason
    assert settled.last_task == 2
    following = decide(settled, START + 7_300)
    assert following.decision is Decision.CLAIM and following.due == START + 7_200


def test_a_schedule_stored_before_claims_had_attempts_reads_with_none_made() -> None:
    from enact.storage._records import decode_record

    old = {"id": 3, "spec": "every 10m", "request": "tidy up", "repo": "", "created_at": START,
           "last_due": START + 600, "last_task": 5, "skipped": 1, "claimed": START + 1_200}
    read = decode_record(Schedule, nest_flat_claim(old), database="scheduler.schedules", key=b"3")
    assert read.claim == ClaimState(claimed=START + 1_200) and read.failed == 0
    assert decide(read, START + 1_300).decision is Decision.RERUN


def test_a_schedule_stored_with_its_claim_flat_reads_it_nested() -> None:
    from enact.storage._records import decode_record

    flat = {"id": 3, "spec": "every 1h", "request": "tidy up", "repo": "", "created_at": START,
            "last_due": None, "last_task": 5, "skipped": 0, "claimed": START + 3_600, "attempts": 2,
            "retry_at": START + 3_700, "failure": "actor 'tasks' did not answer", "failed": 1,
            "last_failure": "given up"}
    read = decode_record(Schedule, nest_flat_claim(flat), database="scheduler.schedules", key=b"3")
    assert read.claim == ClaimState(claimed=START + 3_600, attempts=2, retry_at=START + 3_700,
                                    failure="actor 'tasks' did not answer")
    assert (read.last_task, read.failed, read.last_failure) == (5, 1, "given up")
    assert decide(read, START + 3_650).decision is Decision.WAIT
    assert nest_flat_claim(orjson.loads(orjson.dumps(read))) == orjson.loads(orjson.dumps(read))


@pytest.mark.parametrize("spec", ["", "every", "every 10", "every 10w", "every 0m", "every 400d", "0 9 * *",
                                  "61 * * * *", "tomorrow morning"])
def test_unusable_schedule_is_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(ScheduleError):
        check_spec(spec)


def test_specs_are_normalised() -> None:
    assert check_spec("  Every 2H ") == "every 2h"
    assert check_spec("0  9 * * 1-5") == "0 9 * * 1-5"
    assert check_spec("every 010 m") == "every 10m"


@pytest.mark.parametrize(("spec", "finer"), [
    ("every 10s", True), ("every 90s", True), ("every 1s", True), ("every 60s", False), ("every 120s", False),
    ("every 10m", False), ("every 1h", False), ("daily 09:00", False), ("*/5 * * * *", False),
])
def test_a_schedule_is_finer_than_a_minute_when_its_due_times_fall_between_minutes(spec: str, finer: bool) -> None:
    assert finer_than_a_minute(spec) is finer


def test_cron_says_a_time_to_the_second_only_for_a_schedule_finer_than_a_minute() -> None:
    moment = START + 17
    local = datetime.datetime.fromtimestamp(moment)
    assert moment_said("every 10s", moment) == local.strftime("%Y-%m-%d %H:%M:%S")
    assert moment_said("every 10m", moment) == local.strftime("%Y-%m-%d %H:%M")
    assert moment_said("0 9 * * 1-5", moment) == local.strftime("%Y-%m-%d %H:%M")


def test_a_schedule_without_a_repository_says_its_tasks_take_the_default_one() -> None:
    schedule = Schedule(id=1, spec="every 1h", request="x", repo="", created_at=START)
    assert repo_said(schedule) == "tasks.default_repo"
    assert repo_said(Schedule(id=2, spec="every 1h", request="x", repo="/src/app", created_at=START)) == "/src/app"


def test_backlog_promotes_the_highest_priority_oldest_item_first() -> None:
    def item(id_: int, priority: Priority, created_at: float) -> BacklogItem:
        return BacklogItem(id=id_, text=f"item {id_}", priority=priority, repo="", created_at=created_at)

    items = [item(1, Priority.P1, 1.0), item(2, Priority.P0, 3.0), item(3, Priority.P0, 2.0), item(4, Priority.P2, 0.5)]
    assert next_to_promote(items) == items[2]
    assert next_to_promote([items[0], items[3]]) == items[0]
    assert next_to_promote([]) is None
