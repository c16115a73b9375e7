"""Reviews from chat: ``/review.list``, ``/review.show ID``, ``/review.land
ID``, ``/review.close ID``, through the command registry.

Landing and closing need human authority: the registry refuses them to a
model action, and here a chat origin counts only in a locked conversation
(``chat.allowed_conversations``), where the sender is known to be the owner.
"""

from __future__ import annotations

from typing import TypeVar

from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Param, answered
from enact.messages._registry import Request
from enact.messages.reviews import (
    Close,
    Get,
    Land,
    List,
    Review,
    ReviewState,
)

R = TypeVar("R")

_ID = {"text": Param(str, doc="a review id", usage="ID")}


def _review_id(call: CommandCall) -> int:
    text = str(call.args.get("text", "")).strip().lstrip("#")
    if not text.isdigit():
        raise CommandFailed(f"/{call.name} needs a review id, e.g. /{call.name} 3")
    return int(text)


def _ask_reviews(context: CommandContext, message: Request[R]) -> R:
    return context.ask("reviews", message)


def _line(review: Review) -> str:
    return f"#{review.id} {review.state.value}: task {review.task_id}, {review.branch} in {review.repo}"


def _list(_: CommandCall, context: CommandContext) -> str:
    reply = _ask_reviews(context, List(state=ReviewState.OPEN, limit=20))
    if not reply.reviews:
        return "no open reviews"
    more = "\n(more: enact review list)" if reply.more else ""
    return "Open reviews:\n" + "\n".join(_line(review) for review in reply.reviews) + more


def _show(call: CommandCall, context: CommandContext) -> str:
    review_id = _review_id(call)
    reply = answered(_ask_reviews(context, Get(review_id=review_id)))
    review = reply.review
    lines = [_line(review), f"{review.base[:12]}..{review.head[:12]}"]
    lines += [text for text in (review.diffstat.rstrip(), f"doctor: {review.doctor_summary}" if
                                review.doctor_summary else "", review.note) if text]
    return "\n".join(lines)


def _land(call: CommandCall, context: CommandContext) -> str:
    review_id = _review_id(call)
    reply = answered(_ask_reviews(context, Land(review_id=review_id, origin=call.origin)),
                     f"review {review_id} not landed")
    return f"review {review_id} {reply.review.note}"


def _close(call: CommandCall, context: CommandContext) -> str:
    review_id = _review_id(call)
    answered(_ask_reviews(context, Close(review_id=review_id, origin=call.origin, reason="closed from chat")))
    return f"review {review_id} closed"


def review_commands() -> list[Command]:
    return [
        Command(name="review.list", summary="the open reviews", handler=_list),
        Command(name="review.show", summary="one review", handler=_show, params=_ID),
        Command(name="review.land", summary="land a review (after the doctor passes on the merge)", handler=_land,
                authority=Authority.HUMAN, params=_ID),
        Command(name="review.close", summary="close a review without landing it", handler=_close,
                authority=Authority.HUMAN, params=_ID),
    ]
