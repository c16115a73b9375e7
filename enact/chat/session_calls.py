"""One way to call the runtime on a conversation's own session.

Every caller goes through ``SessionCalls.call``: the conversation actor for
its turns and notes, and the ``task.add`` command for a task's brief
(``CommandContext.converse``). A call resumes the native session the
Sessions actor maps for the conversation, or starts one with the startup
context (the host's, the installed skills', then memory's); it brings the facts memory recalls for
the owner's message, and for a runtime that keeps no history, the session's
history, and the notes waiting for the session (a task's outcome, given
once: the call's Record takes them); it records the mapping (and the
exchange) afterwards, and the skills the runtime's own skill tool loaded
as the conversation's use of them. A resume the
runtime fails is forgotten and tried once on a fresh session, unless the
failure is not the session's (a timeout, a cancel, a rate limit, a login, a
missing binary).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from enact.actors._asks import ActorUnavailable, Asker
from enact.cancellation import CancellationToken, Cancelled
from enact.chat.notices import notes_text
from enact.clock import REAL_CLOCK, Clock
from enact.credentials import redact
from enact.frozen_dataclass import dataclass
from enact.messages.memory import Context, ContextReply
from enact.messages.sessions import Forget, HistoryMessage, Note, Open, ReadHistory, Record
from enact.messages.skills import Startup, Used
from enact.metrics import Metrics
from enact.runtime import (
    Runtime,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeOverBudget,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeSessionUnknown,
    RuntimeTimeout,
    RuntimeUnavailable,
)
from enact.runtime.history import host_keeps_history

log = logging.getLogger(__name__)

MEMORY = "memory"
SESSIONS = "sessions"
SKILLS = "skills"

Tell = Callable[[str, object], None]
"""Tell an actor by name, without waiting."""

NO_MEMORY = ContextReply(startup_text="", recall_text="", decisions=())


class SessionCalls:
    """Calls on conversations' sessions, for whoever holds one of these."""

    def __init__(self, runtime: Runtime, *, ask: Asker, tell: Tell, startup_context: str, prompt_version: int,
                 timeout_s: float, token: CancellationToken, metrics: Metrics, clock: Clock = REAL_CLOCK,
                 hold_records: bool = False) -> None:
        """``hold_records``: a call's ``sessions.Record`` is told by
        ``tell_records`` (or before this object's next ask of the Sessions
        actor) rather than at once: the conversation actor tells its turn's
        end to the inbox first, so that the commit of the reply does not wait
        behind the commit of the mapping."""
        self.runtime = runtime
        self._clock = clock
        self._ask = ask
        self._tell = tell
        self._startup_context = startup_context
        self._prompt_version = prompt_version
        self._timeout_s = timeout_s
        self._token = token
        self._metrics = metrics
        # By session key: the native session this object started and the
        # facts it was given at its start, so recall does not repeat them.
        self._given: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._hold_records = hold_records
        self._held: list[Record] = []

    def tell_records(self) -> None:
        """Tell the Sessions actor the records held back (``hold_records``)."""
        held, self._held = self._held, []
        for record in held:
            self._tell(SESSIONS, record)

    def call(self, session_key: str, prompt: str, *, owner_message: str, owners: bool,
             recall_for: str | None = None, receipt: str | None = None, images: tuple[Path, ...] = (),
             spends_over_budget: bool = False) -> str:
        """The session's answer to ``prompt``. ``owners``: the conversation
        is the owner's (memory gives no fact otherwise); ``recall_for``: the
        owner's message to recall facts for (None: recall nothing);
        ``spends_over_budget``: the owner's CLI, answered whatever the budget says."""
        self.tell_records()  # what this call reads of the session includes them
        # An isolated call (no key) has no mapping and no notes.
        opened = self._ask(SESSIONS, Open(key=session_key, prompt_version=self._prompt_version)) \
            if session_key else None
        resume = opened.session.native_id if opened is not None and opened.session is not None else None
        notes = opened.notes if opened is not None else ()
        call = _Call(session_key=session_key, prompt=prompt, owner_message=owner_message, owners=owners,
                     recall_for=recall_for, receipt=receipt, images=images, notes=notes,
                     spends_over_budget=spends_over_budget)
        try:
            return self._invoke(call, resume)
        except (RuntimeTimeout, RuntimeCancelled, RuntimeRateLimited, RuntimeAuthFailed, RuntimeUnavailable,
                RuntimeOverBudget):
            raise  # not the session's fault: it is kept, and a fresh one would fail the same way
        except RuntimeSessionUnknown:
            if resume is None:
                raise
            log.info("session %s is not known to the runtime (expected after a restart of the %s runtime): "
                     "starting a fresh one", session_key, self.runtime.name)
            self._ask(SESSIONS, Forget(key=session_key))
            return self._invoke(call, None)
        except RuntimeFailure as error:
            if resume is None:
                raise
            log.warning("resuming session %s failed (%s): starting a fresh one", session_key, error)
            # These sessions are conversations' (a RuntimeRequest's default purpose).
            self._metrics.runtime_calls.labels(adapter=self.runtime.name, outcome="resume_failed",
                                               purpose="conversation").inc()
            self._ask(SESSIONS, Forget(key=session_key))
            return self._invoke(call, None)

    def _invoke(self, call: _Call, resume: str | None) -> str:
        runtime = self.runtime
        session_key = call.session_key
        context_at = self._clock.time()  # a fact forgotten from here on may be in this call (sessions.Record)
        memory = self._memory_context(call, resume)
        # The startup context (the host's, the installed skills', then memory's) goes once into each
        # native session, whoever starts it; recall comes with the owner's message.
        prompt = f"{notes_text([note.text for note in call.notes])}\n\n{call.prompt}" if call.notes else call.prompt
        text = prompt
        if resume is None:
            parts = (self._startup_context, self._skills_startup(), memory.startup_text)
            text = "\n\n".join([*(part for part in parts if part), prompt])
        if memory.recall_text:
            text = f"{text}\n\n{memory.recall_text}"
        history: tuple[HistoryMessage, ...] = ()
        capabilities = runtime.capabilities
        if host_keeps_history(capabilities) and session_key and resume is not None:
            history = self._ask(SESSIONS, ReadHistory(key=session_key, native_id=resume)).messages
        request = RuntimeRequest(history=history, session_key=session_key, prompt=text, native_session=resume,
                                 owner_message=call.owner_message, receipt=call.receipt, timeout_s=self._timeout_s,
                                 cancel=self._token.child(), images=call.images,
                                 spends_over_budget=call.spends_over_budget)
        try:
            result = runtime.invoke(request)  # counted by the metered runtime (enact.runtime.metered)
        except Cancelled as error:
            raise RuntimeCancelled(str(error)) from None
        if resume is None and result.native_session:
            self._given[session_key] = (result.native_session, memory.startup_ids)
        if result.skills_used and session_key:
            self._skills_used(session_key, result.skills_used)
        if session_key and (result.native_session or call.notes):
            # Told, not asked: nothing waits for the mapping to be durable
            # (losing it in a crash only means a fresh session next time, and
            # its notes given once more), and the sessions actor reads its own
            # staged writes.
            # Kept with credentials redacted: a marker or an action the
            # memory refused must not be sent again with every later call.
            exchange = (
                (HistoryMessage(role="user", content=redact(text)),
                 HistoryMessage(role="assistant", content=redact(result.text)))
                if host_keeps_history(capabilities) else ()
            )
            self._held.append(Record(key=session_key, native_id=result.native_session or "",
                                     prompt_version=self._prompt_version, exchange=exchange,
                                     history_chars=capabilities.history_chars, context_at=context_at,
                                     notes_given=tuple(note.note_id for note in call.notes)))
            if not self._hold_records:
                self.tell_records()
        return result.text

    def _skills_used(self, session_key: str, names: tuple[str, ...]) -> None:
        """The skills the runtime's own skill tool loaded in this call, recorded
        as the conversation's use (as ``skill.read`` is). Told: nothing waits."""
        try:
            self._tell(SKILLS, Used(names=names, used_by=session_key))
        except ActorUnavailable:
            log.debug("no skills component: the use of %s is not recorded", ", ".join(names))

    def _skills_startup(self) -> str:
        """The installed skills' names and descriptions, for a new session;
        none when the skills component is not running."""
        try:
            return self._ask(SKILLS, Startup()).text
        except ActorUnavailable:
            return ""

    def _memory_context(self, call: _Call, resume: str | None) -> ContextReply:
        """What memory has for this call: its startup context (used only for
        a new session) and the facts recalled for the owner's message, less
        those the session was already given at its start (all of them are
        recalled when that is not known, e.g. after a restart); no fact
        unless the conversation is the owner's. Memory that cannot answer
        costs the call its memories, not the answer."""
        if resume is not None and call.recall_for is None:
            return NO_MEMORY
        given: tuple[str, ...] | None = None
        if resume is not None:
            started, facts = self._given.get(call.session_key, ("", ()))
            given = facts if started == resume else ()
        try:
            return self._ask(MEMORY, Context(query=call.recall_for or "", session_facts=given, owners=call.owners))
        except ActorUnavailable as error:
            log.warning("no memory context for this call: %s", error)
            return NO_MEMORY


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """One call's arguments, kept for its retry on a fresh session."""

    session_key: str
    prompt: str
    owner_message: str
    owners: bool
    recall_for: str | None
    receipt: str | None
    images: tuple[Path, ...]
    notes: tuple[Note, ...]
    """Waiting for the session when the call began: its first words."""
    spends_over_budget: bool = False
