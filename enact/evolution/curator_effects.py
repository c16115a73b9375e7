"""What the curator's parts ask of their actor, as plain values.

The parts (``curator_proposals``, ``curator_decisions``, ``curator_adoption``,
``brainstorms``) are plain objects over the curator's tables: each step takes
the message and the time and is a generator that yields the effects it needs
carried out, in order, and returns the reply. An ask's reply is needed in
the middle of a step (approval submits a task and records its id), so an
effect is answered where it was yielded: ``reply = yield from ask(...)``.
``run_steps`` runs a step to its reply, handing each effect to whoever
carries it out: the curator actor, on its thread (``CuratorActor.carry``),
or a test that answers the effects itself, without threads.

- ``Ask``: ask another actor; its reply is sent back. An actor that does not
  answer is sent back as ``Unanswered`` when the step said it copes
  (``guarded``); otherwise the error is raised at the ``yield``, as a
  failed ask would be.
- ``Tell``: tell another actor; ``Unanswered`` comes back when it is not
  running.
- ``ModelCall``: one isolated read-only model call, off the actor's thread;
  ``then(answer, failure, now)`` is the next step, carried out on it.
- ``CandidatesChanged``, ``ProposalRecorded``: what the curator counts.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar, cast

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Ask:
    actor: str
    message: Request[Any]
    guarded: bool = False
    """The step copes with an actor that does not answer (``Unanswered``)."""


@dataclass(frozen=True, slots=True)
class Tell:
    actor: str
    message: object


@dataclass(frozen=True, slots=True)
class Unanswered:
    """The actor asked or told is not running (or did not answer in time)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ModelCall:
    """An isolated read-only model call of ``purpose`` (``curation`` for
    synthesis and curation, ``brainstorm`` for a brainstorm: each has its
    own budget and token series); ``then`` gets its answer, why it failed
    (the answer is then empty) and the time."""

    prompt: str
    then: Callable[[str, str, float], Steps[None]]
    purpose: str = "curation"


@dataclass(frozen=True, slots=True)
class CandidatesChanged:
    """A candidate was stored or changed: the state gauge is recounted."""


@dataclass(frozen=True, slots=True)
class ProposalRecorded:
    """A proposal was recorded: counted."""


Effect = Ask | Tell | ModelCall | CandidatesChanged | ProposalRecorded

Steps = Generator[Effect, object, R]
"""A step of a part: the effects it yields, each answered, then its reply."""


def run_steps(steps: Steps[R], carry_out: Callable[[Effect], object]) -> R:
    """Run ``steps`` to its reply: each effect it yields goes to
    ``carry_out``, whose answer is sent back where it was yielded, or whose
    exception is raised there (as the step's own call would have raised)."""
    answer: object = None
    error: Exception | None = None
    while True:
        try:
            effect = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as done:
            reply: R = done.value
            return reply
        answer, error = None, None
        try:
            answer = carry_out(effect)
        except Exception as failure:
            error = failure


def ask(actor: str, message: Request[R]) -> Steps[R]:
    """The reply ``message`` declares (the actor's asks check its type);
    an actor that does not answer raises here."""
    reply = yield Ask(actor, message)
    return cast(R, reply)


def ask_or_unanswered(actor: str, message: Request[R]) -> Steps[R | Unanswered]:
    reply = yield Ask(actor, message, guarded=True)
    return cast("R | Unanswered", reply)


def tell(actor: str, message: object) -> Steps[Unanswered | None]:
    outcome = yield Tell(actor, message)
    return outcome if isinstance(outcome, Unanswered) else None


def counted(what: CandidatesChanged | ProposalRecorded) -> Steps[None]:
    yield what
