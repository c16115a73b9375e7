"""The memory's chat commands: ``/remember``, ``/memory``, ``/forget``.

They ask the Memory actor, as the CLI does. ``/forget`` needs a human
(``Authority.HUMAN``): a model action can never forget; the Memory actor
checks the origin again. Memory is the owner's: ``/memory`` is a ``read``
command, so the registry lets it list facts only in the owner's conversation
(``CommandCall.owners``), for a person or a model's action alike; the others
change memory, so they need it anyway.
"""

from __future__ import annotations

from enact.chat.markers import FROM_A_RECEIPT, repeats_receipt
from enact.commands import Authority, Command, CommandCall, CommandContext, Param, answered
from enact.memory.facts import FactState, Sensitivity
from enact.messages.common import MODEL_ACTION, Refused, is_human
from enact.messages.memory import Merged, Pending, Saved

MEMORY = "memory"
_LISTED = 20
_REDACT_FLAG = "--redact"


def memory_commands() -> list[Command]:
    text = {"text": Param(str, doc="the fact", usage="TEXT")}
    return [
        Command(name="remember", summary="remember a fact (/remember TEXT)", handler=_remember,
                authority=Authority.EFFECT, params=text),
        Command(name="memory", summary="list remembered facts (/memory [TAG])", handler=_list, shows="memory",
                params={"text": Param(str, required=False, doc="a tag", usage="TAG")}),
        Command(name="forget", summary="forget one fact by id, text or tag (/forget [--redact] SELECTOR)",
                handler=_forget, authority=Authority.HUMAN,
                params={"text": Param(str, doc="a fact's id, text or tag", usage="[--redact] SELECTOR")}),
    ]


def _remember(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.memory import Remember

    # A human typed it, or a model asked for it as an action: the fact says which.
    origin = call.origin if is_human(call.origin) else MODEL_ACTION
    # A model keeping what an earlier action's receipt said is not the owner's word.
    hold = FROM_A_RECEIPT if origin == MODEL_ACTION and repeats_receipt(call.args["text"], call.receipts) else ""
    reply = context.ask(MEMORY, Remember(text=call.args["text"], origin=origin, hold=hold))
    if isinstance(reply, Refused):  # its reason starts "refused: ", which says it was not saved
        answered(reply)
    return memory_notice(reply)


def _list(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.memory import List

    tag = str(call.args.get("text", "")).strip().lower()
    reply = context.ask(MEMORY, List(tag=tag, max_facts=_LISTED))
    facts = reply.facts
    withheld = 0
    if not is_human(call.origin):
        # The receipt goes to the model: what memory never sends a model
        # (pending, secret, private facts) is left out here too.
        facts = tuple(fact for fact in facts if fact.state is FactState.ACTIVE
                      and fact.sensitivity is Sensitivity.NORMAL)
        withheld = len(reply.facts) - len(facts)
    if not facts:
        return "no facts remembered" + (f" with tag {tag!r}" if tag else "") + _withheld_note(withheld)
    # A chat's text passes through its channel's servers: a secret fact's
    # text stays at the owner's shell, even in the owner's own chat.
    lines = [f"{fact.id} [{fact.state}] "
             + (f"(secret: `enact memory show {fact.id}` shows it)" if fact.sensitivity is Sensitivity.SECRET
                else fact.text)
             for fact in facts]
    if reply.total > len(reply.facts):
        lines.append(f"… and {reply.total - len(reply.facts)} more (enact memory list)")
    return "\n".join(lines) + _withheld_note(withheld)


def _withheld_note(withheld: int) -> str:
    return f"\n({withheld} pending, private or secret facts not shown to a model)" if withheld else ""


def _forget(call: CommandCall, context: CommandContext) -> str:
    from enact.messages.memory import Forget, forgotten_line

    selector = str(call.args["text"]).strip()
    redact = selector.startswith(_REDACT_FLAG)
    if redact:
        selector = selector[len(_REDACT_FLAG):].strip()
    return forgotten_line(answered(context.ask(MEMORY, Forget(selector=selector, redact=redact, origin=call.origin))))


def memory_notice(reply: Saved | Merged | Pending | Refused) -> str:
    """What became of a fact, in a few words; a refusal gives its reason only."""
    match reply:
        case Saved():
            return f"saved as {reply.id}" + (" (clipped)" if reply.clipped else "")
        case Merged() if reply.unchanged:
            return f"already remembered as {reply.id}"
        case Merged():
            return f"merged into {reply.id}"
        case Pending():
            why = f": {reply.why}" if reply.why else ""
            return f"held for confirmation as {reply.id}{why} (enact memory confirm {reply.id})"
        case Refused():
            return f"not saved, {reply.reason}"

