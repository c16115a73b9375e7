"""The memory protocol: remembering, listing, showing, forgetting facts.

A refusal (``Refused``) says why in one line and never repeats the refused
text, which may hold a credential.
"""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.memory.context import Decision
from enact.memory.facts import Fact
from enact.memory.identity import BodyIdentity, PrivateIdentity
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import NotFound, Origin, Refused

NOT_ADMITTED = "not-admitted"
"""The ``Refused.code`` of a text memory's admission declines: empty, a
credential, an instruction to the agent, a malformed field."""
MAX_TEXT = 16 * 1024
"""Far above ``memory.max_fact_chars``: a longer text is clipped, not refused."""
MAX_FIELD = 256


@request("memory.Remember")
@dataclass(frozen=True, slots=True, kw_only=True)
class Remember(Request["Saved | Merged | Pending | Refused"]):
    """Admit ``text`` as a fact (``enact.memory.admission``). An enum left
    ``None`` takes its default; confidence's depends on the origin."""

    text: str = field(metadata=limit(MAX_TEXT))
    type: str | None = field(default=None, metadata=limit(64))
    tags: tuple[str, ...] = field(default=(), metadata=limit(64))
    confidence: str | None = field(default=None, metadata=limit(64))
    scope: str | None = field(default=None, metadata=limit(64))
    subject: str = field(default="", metadata=limit(MAX_FIELD))
    sensitivity: str | None = field(default=None, metadata=limit(64))
    refs: tuple[str, ...] = field(default=(), metadata=limit(64))
    origin: Origin = ""
    hold: str = field(default="", metadata=limit(MAX_FIELD))
    """The sender's reason to hold the fact for the owner ("" for none): a
    marker from a conversation that is not the owner's, or one repeating an
    action's receipt. It can only hold a fact, never make one active
    (``enact.memory.holding``)."""


@reply("memory.Saved")
@dataclass(frozen=True, slots=True, kw_only=True)
class Saved:
    id: str
    clipped: bool = False
    """The text was longer than ``memory.max_fact_chars`` and was clipped."""


@reply("memory.Merged")
@dataclass(frozen=True, slots=True, kw_only=True)
class Merged:
    """The text equals an existing fact's after normalisation: merged into it."""

    id: str
    unchanged: bool = False
    """The fact is active and the text was one to hold for the owner (not
    the owner's word): dropped as a duplicate, the fact left as it was."""


@reply("memory.Pending")
@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    """Held for the owner's confirmation (``enact.memory.holding``); never
    sent to a model until confirmed."""

    id: str
    merged: bool = False
    why: str = ""
    """One line, never the text: the conversation is not the owner's, the
    text repeats an action's output, it says what the agent may do …"""


@request("memory.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["FactList"]):
    """Facts, most recently updated first. Filters combine; ``pending``
    lists only the facts held for confirmation."""

    tag: str = field(default="", metadata=limit(MAX_FIELD))
    origin_is: str = field(default="", metadata=limit(MAX_FIELD))
    pending: bool = False
    max_facts: int = 1000


@reply("memory.FactList")
@dataclass(frozen=True, slots=True, kw_only=True)
class FactList:
    facts: tuple[Fact, ...]
    total: int
    """How many matched, ``facts`` holding the first ``max_facts`` of them."""


@request("memory.Show")
@dataclass(frozen=True, slots=True, kw_only=True)
class Show(Request["FactShown | NotFound"]):
    id: str = field(metadata=limit(MAX_FIELD))


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One entry of a fact's history. No text: a forgotten fact's history
    goes with it, and a merge's text equals the fact's anyway."""

    at: float
    change: str
    """``created``, ``merged``, ``confirmed``."""
    origin: str
    refs: tuple[str, ...] = ()
    held: str = ""
    """Why this change left the fact held for the owner ("" when it did not)."""


@reply("memory.FactShown")
@dataclass(frozen=True, slots=True, kw_only=True)
class FactShown:
    fact: Fact
    history: tuple[Change, ...]


@request("memory.Forget")
@dataclass(frozen=True, slots=True, kw_only=True)
class Forget(Request["Forgotten | NotFound | Refused"]):
    """Forget one fact: an exact id wins over any text match; otherwise a
    text or tag selector must match exactly one fact. Needs a human origin.
    Whatever enact keeps and sends to a model loses it too: the kept
    histories are redacted, the native sessions that may hold it reset.
    ``redact`` also replaces the fact's text in the turn log. A fact whose
    forgetting was cut short (a crash) is found again by its id or text, and
    the forgetting finished (``enact.memory.forgetting``)."""

    selector: str = field(metadata=limit(MAX_TEXT))
    redact: bool = False
    origin: Origin = ""


@reply("memory.Forgotten")
@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    id: str
    redacted: bool
    """The turn log was searched and the text replaced where found."""
    turns_redacted: int = 0
    redact_error: str = ""
    """Why the forgetting could not be finished (the turn log, the histories
    or the sessions not reached); it is retried at the next start and by
    forgetting the fact again."""
    histories_redacted: int = 0
    """Kept message histories (the ``openai`` runtime's) that held the text."""
    sessions_reset: int = 0
    """Native runtime sessions that may have been given the fact, reset."""


def forgotten_line(reply: Forgotten) -> str:
    """The reply in one line, for the CLI and the chat command (they load only this module)."""
    if reply.redacted:
        redacted = f"redacted {reply.turns_redacted} turns, {reply.histories_redacted} histories"
    else:
        unasked = "" if "the turn log" in reply.redact_error else ", not the turn log (use --redact)"
        redacted = f"redacted {reply.histories_redacted} histories{unasked}"
    line = f"forgot 1 fact ({reply.id}); {redacted}; reset {reply.sessions_reset} sessions"
    return line + (f"; {reply.redact_error}" if reply.redact_error else "")


@request("memory.Confirm")
@dataclass(frozen=True, slots=True, kw_only=True)
class Confirm(Request["Confirmed | NotFound | Refused"]):
    """Make a held (pending) fact active. Needs a human origin."""

    id: str = field(metadata=limit(MAX_FIELD))
    origin: Origin = ""


@reply("memory.Confirmed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed:
    id: str


@request("memory.Reject")
@dataclass(frozen=True, slots=True, kw_only=True)
class Reject(Request["Discarded | NotFound | Refused"]):
    """Drop a held (pending) fact. Needs a human origin."""

    id: str = field(metadata=limit(MAX_FIELD))
    origin: Origin = ""


@reply("memory.Discarded")
@dataclass(frozen=True, slots=True, kw_only=True)
class Discarded:
    id: str


# -- identity and context (branch mem-ctx) -------------------------------------


@request("memory.InstallIdentity")
@dataclass(frozen=True, slots=True, kw_only=True)
class InstallIdentity(Request["IdentityInstalled | Refused"]):
    """Install the owner's private identity, replacing any earlier one in one
    write. The actor checks it again field by field. Needs a human origin."""

    identity: PrivateIdentity
    origin: Origin = ""


@reply("memory.IdentityInstalled")
@dataclass(frozen=True, slots=True, kw_only=True)
class IdentityInstalled:
    name: str
    replaced: bool


@request("memory.GetIdentity")
@dataclass(frozen=True, slots=True, kw_only=True)
class GetIdentity(Request["Identity"]):
    pass


@reply("memory.Identity")
@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    body: BodyIdentity
    private: PrivateIdentity | None


@request("memory.ClearIdentity")
@dataclass(frozen=True, slots=True, kw_only=True)
class ClearIdentity(Request["IdentityCleared | Refused"]):
    """Remove the private identity. Needs a human origin."""

    origin: Origin = ""


@reply("memory.IdentityCleared")
@dataclass(frozen=True, slots=True, kw_only=True)
class IdentityCleared:
    cleared: bool
    """False when there was none."""


@request("memory.Context")
@dataclass(frozen=True, slots=True, kw_only=True)
class Context(Request["ContextReply"]):
    """What a model would be sent from memory: the startup context and the
    facts recalled for ``query`` (the owner's current message). With
    ``explain``, why each fact looked at was or was not included."""

    query: str = field(default="", metadata=limit(MAX_TEXT))
    explain: bool = False
    owners: bool = False
    """For the owner's conversation (``enact.ownership``). Memory is the
    owner's: any other gets the body identity only, no fact and no private
    identity."""
    session_facts: tuple[str, ...] | None = field(default=None, metadata=limit(100_000))
    """The facts a resumed session was given at its start, which recall
    leaves out (and the reply's ``startup_text`` is then empty: the session
    has its own); None for a new session, which gets ``startup_ids``."""


@reply("memory.ContextReply")
@dataclass(frozen=True, slots=True, kw_only=True)
class ContextReply:
    startup_text: str
    recall_text: str
    decisions: tuple[Decision, ...]
    startup_ids: tuple[str, ...] = ()
    """The facts in ``startup_text``."""
    decisions_left_out: int = 0
    """Decisions not explained, to keep the reply under the frame (every
    inclusion is explained; exclusions beyond the first are counted here)."""
