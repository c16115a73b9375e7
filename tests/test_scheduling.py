"""Cron schedules and backlog order as plain rules (enact.tasks.scheduling),
driven by an explicit clock."""

from __future__ import annotations

import datetime

import pytest

from enact.tasks.scheduling import (
    BacklogItem,
    Decision,
    Priority,
    Schedule,
    ScheduleError,
    check_spec,
    claim,
    decide,
    handled,
    idempotency_key,
    latest_due,
    next_to_promote,
)

START = 1_800_000_000.0  # any fixed moment


def schedule(spec: str, **fields: object) -> Schedule:
    return Schedule(id=7, spec=check_spec(spec), request="tidy up", repo="", created_at=START, **fields)  # type: ignore[arg-type]


def test_interval_schedule_is_due_each_whole_interval_after_it_was_added() -> None:
    every = schedule("every 10m")
    assert decide(every, START + 599, previous_unfinished=False).decision is Decision.NOTHING_DUE
    step = decide(every, START + 600, previous_unfinished=False)
    assert step.decision is Decision.SUBMIT and step.due == START + 600
    assert idempotency_key(every.id, START + 600) == f"cron:7:{int(START) + 600}"
    after = handled(every, step, task_id=3)
    assert after.last_due == START + 600 and after.last_task == 3
    assert decide(after, START + 1199, previous_unfinished=False).decision is Decision.NOTHING_DUE
    assert decide(after, START + 1200, previous_unfinished=False).due == START + 1200


def test_cron_expression_is_due_at_its_next_matching_minute_in_local_time() -> None:
    # 09:00 on a weekday, local time: find the Monday after START.
    day = datetime.datetime.fromtimestamp(START).astimezone().replace(hour=12, minute=0, second=0, microsecond=0)
    while day.weekday() != 0:
        day += datetime.timedelta(days=1)
    created = (day - datetime.timedelta(days=3)).timestamp()  # the Friday before, at noon
    nine_monday = day.replace(hour=9).timestamp()
    weekdays = Schedule(id=1, spec=check_spec("0 9 * * 1-5"), request="r", repo="", created_at=created)
    # Saturday and Sunday pass without a due time; Monday 09:00 is the next.
    assert latest_due(weekdays, nine_monday - 1) is None
    assert latest_due(weekdays, nine_monday) == nine_monday
    assert latest_due(weekdays, nine_monday + 3_600) == nine_monday


def test_a_due_time_while_the_previous_task_is_unfinished_submits_nothing_and_is_skipped() -> None:
    every = handled(schedule("every 1h"), decide(schedule("every 1h"), START + 3_600, previous_unfinished=False),
                    task_id=1)
    busy = decide(every, START + 7_200, previous_unfinished=True)
    assert busy.decision is Decision.SKIP_BUSY
    skipped = handled(every, busy, task_id=None)
    assert skipped.last_task == 1 and skipped.skipped == 1 and skipped.last_due == START + 7_200
    # Once that task has ended, the next due time submits again.
    assert decide(skipped, START + 7_300, previous_unfinished=False).decision is Decision.NOTHING_DUE
    assert decide(skipped, START + 10_800, previous_unfinished=False).decision is Decision.SUBMIT


def test_runs_missed_while_down_coalesce_into_one_run_at_the_latest_due_time() -> None:
    every = schedule("every 10m")
    down_for = 6 * 3_600 + 125  # 36 due times missed
    step = decide(every, START + down_for, previous_unfinished=False)
    assert step.decision is Decision.SUBMIT and step.due == START + 36 * 600
    after = handled(every, step, task_id=9)
    assert decide(after, START + down_for, previous_unfinished=False).decision is Decision.NOTHING_DUE
    minutely = schedule("* * * * *")
    month = START + 31 * 86_400
    step = decide(minutely, month + 30, previous_unfinished=False)
    assert step.decision is Decision.SUBMIT and step.due is not None and month - 30 <= step.due <= month + 30
    assert decide(handled(minutely, step, task_id=2), month + 30,
                  previous_unfinished=False).decision is Decision.NOTHING_DUE


def test_a_claim_left_unacknowledged_by_a_crash_is_submitted_again_under_the_same_key() -> None:
    every = schedule("every 10m")
    step = decide(every, START + 600, previous_unfinished=False)
    assert step.decision is Decision.SUBMIT and step.due is not None and not step.resumed
    claimed = claim(every, step.due)  # committed before the task is submitted
    assert claimed.claimed == START + 600 and claimed.last_due is None
    # The daemon dies after the submit, before the acknowledgement, and stays
    # down past two more due times: the claim comes first, not the latest.
    again = decide(claimed, START + 1_900, previous_unfinished=True)
    assert again.decision is Decision.SUBMIT and again.resumed and again.due == step.due
    assert idempotency_key(every.id, again.due) == idempotency_key(every.id, step.due)
    acknowledged = handled(claimed, again, task_id=4)
    assert acknowledged.claimed is None and acknowledged.last_due == START + 600 and acknowledged.last_task == 4
    # Then the due times missed meanwhile coalesce into the latest, as ever.
    later = decide(acknowledged, START + 1_900, previous_unfinished=False)
    assert later.decision is Decision.SUBMIT and later.due == START + 1_800 and not later.resumed


def test_a_refused_submission_spends_its_claimed_due_time_and_keeps_the_last_task() -> None:
    every = schedule("every 10m", last_due=START + 600, last_task=2)
    step = decide(every, START + 1_200, previous_unfinished=False)
    assert step.due is not None
    refused = handled(claim(every, step.due), step, task_id=None)
    assert refused.claimed is None and refused.last_due == START + 1_200 and refused.last_task == 2


@pytest.mark.parametrize("spec", ["", "every", "every 10", "every 10w", "every 0m", "every 400d", "0 9 * *",
                                  "61 * * * *", "tomorrow morning"])
def test_unusable_schedule_is_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(ScheduleError):
        check_spec(spec)


def test_specs_are_normalised() -> None:
    assert check_spec("  Every 2H ") == "every 2h"
    assert check_spec("0  9 * * 1-5") == "0 9 * * 1-5"


def test_backlog_promotes_the_highest_priority_oldest_item_first() -> None:
    def item(id_: int, priority: Priority, created_at: float) -> BacklogItem:
        return BacklogItem(id=id_, text=f"item {id_}", priority=priority, repo="", created_at=created_at)

    items = [item(1, Priority.P1, 1.0), item(2, Priority.P0, 3.0), item(3, Priority.P0, 2.0), item(4, Priority.P2, 0.5)]
    assert next_to_promote(items) == items[2]
    assert next_to_promote([items[0], items[3]]) == items[0]
    assert next_to_promote([]) is None
