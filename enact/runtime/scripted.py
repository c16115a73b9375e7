"""The scripted runtime: deterministic and offline, driven by a rules file.

It is the embedded default, so that every chat path can be shown and tested
without a network. Its replies say that they come from the scripted runtime.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import threading
import uuid
from collections.abc import Callable, Collection
from dataclasses import field
from pathlib import Path
from typing import Any

import orjson

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.home_guard import HomeRefused, check_owned_file
from enact.runtime import (
    PURPOSES,
    Capabilities,
    CommandRun,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeResult,
    RuntimeSessionUnknown,
    RuntimeUnavailable,
    Usage,
)
from enact.runtime._subprocess import run_command
from enact.tables import table_list

log = logging.getLogger(__name__)

_ECHO_LIMIT = 200


_FAILURES: dict[str, type[RuntimeFailure]] = {
    "failed": RuntimeFailure, "auth": RuntimeAuthFailed, "rate-limited": RuntimeRateLimited,
    "unavailable": RuntimeUnavailable,
}
"""What a ``fail`` rule raises, by its ``fail_as``: how a real runtime fails, offline."""


CONVERSATION = "conversation"
"""A rule's purpose when it names none: it answers the owner's chat messages
only, so a rule written for chat never answers a scan's, a curator's or a
task's prompt by a word that happens to be in it."""


_TOKEN_KEYS = ("input_tokens", "output_tokens")
"""What a rule may say its calls spent."""
_MAX_TOKENS = 10**9


class RulesError(EnactError, ValueError):
    """The rules file is not valid; the message names the file and the rule."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    reply: str | None = None
    action: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    then: str | None = None
    fail: str | None = None
    fail_as: str = "failed"
    """The failure's kind (``RuntimeFailure.kind``): failed, auth, rate-limited, unavailable."""
    run: tuple[str, ...] = ()
    """A command run in the request's working directory before ``reply``:
    what a model's tool call would do in a task's worktree."""
    purpose: str = CONVERSATION
    """The calls it answers (``RuntimeRequest.purpose``), each matched on
    its own text: see ``matched_text``."""
    usage: Usage = field(default_factory=Usage)
    """The tokens a call it answers (or fails) reports as spent
    (``input_tokens``, ``output_tokens``): what budgets are tested with."""
    where: str = ""  # "<file>: rule #N", for messages about the rule


def parse_rules(text: str, *, source: str) -> list[Rule]:
    rules = []
    keys = frozenset({"match", "purpose", "reply", "action", "args", "then", "fail", "fail_as", "run",
                      *_TOKEN_KEYS})
    for where, table in table_list(text, source=source, name="rule", keys=keys, error=RulesError):
        if not isinstance(table.get("match"), str):
            raise RulesError(f"{where}: 'match' must be a string")
        purpose = table.get("purpose", CONVERSATION)
        if purpose not in PURPOSES:
            raise RulesError(f"{where}: 'purpose' is one of {', '.join(PURPOSES)}")
        try:
            pattern = re.compile(table["match"], re.IGNORECASE)
        except re.error as error:
            raise RulesError(f"{where}: 'match' is not a valid regular expression: {error}") from None
        has_reply, has_action = "reply" in table, "action" in table
        if has_reply + has_action + ("fail" in table) != 1:
            raise RulesError(f"{where}: give exactly one of 'reply', 'action' or 'fail'")
        for key in ("reply", "action", "then", "fail"):
            if key in table and not isinstance(table[key], str):
                raise RulesError(f"{where}: {key!r} must be a string")
        if not isinstance(table.get("args", {}), dict):
            raise RulesError(f"{where}: 'args' must be a table")
        if has_reply and ("args" in table or "then" in table):
            raise RulesError(f"{where}: 'args' and 'then' belong to an action rule")
        run = table.get("run", [])
        if not isinstance(run, list) or not all(isinstance(part, str) for part in run) or ("run" in table and not run):
            raise RulesError(f"{where}: 'run' must be a non-empty list of strings (a command and its arguments)")
        if "fail_as" in table and ("fail" not in table or table["fail_as"] not in _FAILURES):
            raise RulesError(f"{where}: 'fail_as' goes with 'fail' and is one of {', '.join(_FAILURES)}")
        if run and not has_reply:
            raise RulesError(f"{where}: 'run' goes with 'reply' (the command runs, then the rule replies)")
        if run and purpose != "task":
            raise RulesError(f"{where}: 'run' goes with purpose = \"task\" (only a task's call has a working "
                             "directory)")
        if has_action and purpose != CONVERSATION:
            raise RulesError(f"{where}: 'action' goes with the conversation purpose (only a conversation runs actions)")
        for key in ("reply", "then"):
            if key in table:
                _check_groups(pattern, table[key], f"{where}: {key!r}")
        for key in _TOKEN_KEYS:
            count = table.get(key, 0)
            if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= _MAX_TOKENS:
                raise RulesError(f"{where}: {key!r} must be a whole number of tokens from 0 to {_MAX_TOKENS}")
        rules.append(
            Rule(
                where=where,
                pattern=pattern,
                reply=table.get("reply"),
                action=table.get("action"),
                args=dict(table.get("args", {})),
                then=table.get("then"),
                fail=table.get("fail"),
                run=tuple(run),
                fail_as=table.get("fail_as", "failed"),
                purpose=purpose,
                usage=Usage(**{key: table.get(key, 0) for key in _TOKEN_KEYS}),
            )
        )
    return rules


def _check_groups(pattern: re.Pattern[str], template: str, where: str) -> None:
    """Expand the template against a match of the same groups (wrapping the
    pattern in an optional alternative keeps their numbers and names, and it
    always matches the empty string), so a group the pattern lacks is found
    now rather than on every matching event."""
    try:
        probe = re.compile(f"(?:{pattern.pattern})|", pattern.flags).match("")
    except re.error:
        return  # e.g. global flags, which must lead: the check is skipped
    if probe is None:
        return
    try:
        probe.expand(template.replace("{receipt}", ""))
    except (re.error, IndexError) as error:
        raise RulesError(f"{where} names a group its 'match' does not have: {error}") from None


class ScriptedRuntime:
    name = "scripted"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=True,
                                native_skills=".claude/skills")
    """Its ``run`` rules start under ``RuntimeRequest.confine``; it has no
    state directories (its sessions are in memory), so its conversation
    calls are not confined. A task's skills are placed where Claude Code
    finds them, so a rule's command can read them as that CLI would."""
    waits_for = "the scripted runtime"
    """What a call waits for, as ``runtime check --probe`` names it."""

    def __init__(
        self,
        rules_path: Path,
        *,
        transcript: Path | None = None,
        known_commands: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.rules_path = rules_path
        self.transcript = transcript
        self._known_commands = known_commands
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._stamp: tuple[int, int] | None = None
        self._sessions: set[str] = set()
        self._load(strict=True)

    # -- rules, read at start and whenever the file changes -----------------

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            info = self.rules_path.stat()
        except FileNotFoundError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def _load(self, *, strict: bool) -> None:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        try:
            if stamp is not None:
                check_owned_file(self.rules_path)  # checked on every reload, not only at start
            text = self.rules_path.read_text(encoding="utf-8") if stamp is not None else ""
            rules = parse_rules(text, source=str(self.rules_path))
        except (OSError, UnicodeDecodeError, RulesError, HomeRefused) as error:
            if strict:
                raise RulesError(str(error)) from None
            log.error("keeping the previous scripted rules: %s", error)
            self._stamp = stamp
            return
        first = self._stamp is None and not self._rules
        self._rules, self._stamp = rules, stamp
        verb = "loaded" if first else "reloaded"
        log.info("scripted rules %s from %s: %d rules", verb, self.rules_path, len(rules))
        self._warn_unknown_actions(rules)

    def _warn_unknown_actions(self, rules: list[Rule]) -> None:
        # Loaded anyway: a rule may test exactly how an unknown action is refused.
        if self._known_commands is None:
            return
        known = self._known_commands()
        for rule in rules:
            if rule.action is not None and rule.action not in known:
                log.warning("%s: action %r is not a registered command; the rule loads, and the action "
                            "will be refused", rule.where, rule.action)

    def rules(self) -> list[Rule]:
        with self._lock:
            self._load(strict=False)
            return list(self._rules)

    # -- calls --------------------------------------------------------------

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        if request.cancel.cancelled:
            raise RuntimeCancelled(request.cancel.reason)
        rules = [rule for rule in self.rules() if rule.purpose == request.purpose]
        try:
            if not request.session_key:
                text, usage = self._isolated(rules, request)
                result = RuntimeResult(text=text, usage=usage)
            else:
                native = self._session(request.native_session)
                ran: list[CommandRun] = []
                text, usage = self._answer(rules, request, ran)
                result = RuntimeResult(text=text, native_session=native, commands=tuple(ran), usage=usage)
        except RuntimeFailure as failure:
            self._record(request, None, f"failed: {failure}")
            raise
        self._record(request, result.native_session, result.text)
        return result

    def _record(self, request: RuntimeRequest, native: str | None, answer: str) -> None:
        """Append the call to the transcript, so a person (or a test) can see
        exactly what a model would have been sent."""
        if self.transcript is None:
            return
        line = {
            "session_key": request.session_key,
            "resumed": request.native_session,
            "session": native,
            "prompt": request.prompt,
            "images": [str(image) for image in request.images],
            "answer": answer,
        }
        with self._lock, open(self.transcript, "ab") as transcript:
            transcript.write(orjson.dumps(line) + b"\n")

    def _session(self, resume: str | None) -> str:
        with self._lock:
            if resume is None:
                native = f"scripted-{uuid.uuid4().hex}"
                self._sessions.add(native)
                return native
            if resume not in self._sessions:
                # Like a real CLI whose session store was wiped: resuming fails.
                raise RuntimeSessionUnknown(f"scripted runtime has no session {resume!r}")
            return resume

    @staticmethod
    def _isolated(rules: list[Rule], request: RuntimeRequest) -> tuple[str, Usage]:
        """A call of no session (a scan, the curator, a probe): the first
        rule of its purpose found in the prompt fails it or replies."""
        prompt = matched_text(request)
        for rule in rules:
            match = rule.pattern.search(prompt)
            if match is not None and rule.fail is not None:
                raise _FAILURES[rule.fail_as](f"scripted failure: {rule.fail}", usage=rule.usage)
            if match is not None and rule.reply is not None:
                return match.expand(rule.reply), rule.usage
        return "[]", Usage()

    @staticmethod
    def _answer(rules: list[Rule], request: RuntimeRequest, ran: list[CommandRun]) -> tuple[str, Usage]:
        """The rule's answer and what it says it spent; a command its
        ``run`` ran is added to ``ran``."""
        message = matched_text(request)
        for rule in rules:
            match = rule.pattern.search(message)
            if match is None:
                continue
            if rule.fail is not None:
                raise _FAILURES[rule.fail_as](f"scripted failure: {rule.fail}", usage=rule.usage)
            if rule.run:
                ran.append(_run_in_workdir(rule, request))
            if rule.reply is not None:
                return match.expand(rule.reply), rule.usage
            if request.receipt is not None and rule.then is not None:
                # Groups first, so a backslash in the receipt is kept as it is.
                return match.expand(rule.then).replace("{receipt}", request.receipt), rule.usage
            return orjson.dumps({"action": rule.action, "args": rule.args}).decode(), rule.usage
        echo = message if len(message) <= _ECHO_LIMIT else message[:_ECHO_LIMIT] + "…"
        return f"(scripted runtime) You said: {echo}", Usage()


def matched_text(request: RuntimeRequest) -> str:
    """What a rule's ``match`` is searched in. A call on a session (a
    conversation's, a task's) carries the owner's words apart from the
    composed prompt: the chat message (``[task brief] <request>`` when
    ``task.add`` asks for a brief), or the task's request (a repair:
    ``repair N/M: <what failed>``). A call of no session (a scan, the
    curator, a probe) has only its prompt, which starts with fixed words."""
    return request.owner_message if request.session_key else request.prompt


def _run_in_workdir(rule: Rule, request: RuntimeRequest) -> CommandRun:
    """Run a rule's command in the request's working directory, confined as
    the request says; its exit code does not fail the call (a model's tool
    call may fail too), but a timeout or a cancellation does."""
    if request.cwd is None:
        raise RuntimeFailure(f"scripted failure: {rule.where} has 'run' but the request has no working directory")
    # A task's commands get its allow-listed environment; otherwise the
    # daemon's own settings at least stay out of it.
    env = dict(request.env) if request.env is not None else {
        key: value for key, value in os.environ.items() if not key.startswith("ENACT_")}
    output = run_command([*request.confine, *rule.run], stdin_text="", cwd=request.cwd, env=env,
                         timeout_s=request.timeout_s, cancel=request.cancel)
    log.info("%s ran %s in %s: exit %d", rule.where, rule.run[0], request.cwd, output.exit_code)
    printed = f"{output.stdout}\n{output.stderr}".strip()
    return CommandRun(command=shlex.join(rule.run), exit_code=output.exit_code,
                      output=printed[-500:] if output.exit_code else "")
