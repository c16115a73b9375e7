"""Evolution's settings (``evolve``): its keys, their checks, and the typed
value the evolve run, the curator and the scanner read."""

from __future__ import annotations

from enact.config import Check, Config, Setting, between, one_of
from enact.evolution.modes import EvolveMode
from enact.frozen_dataclass import dataclass
from enact.schedules import FORMS as SCHEDULE_FORMS
from enact.schedules import ScheduleError, parse


def _is_evolve_schedule(value: str) -> bool:
    try:
        parse(value)
    except ScheduleError:
        return False
    return True


def _is_conversation(value: str) -> bool:
    channel, sep, conversation = value.partition(":")
    return bool(sep and channel.strip() and conversation.strip())


def _is_parent(value: str) -> bool:
    return not value.startswith("-") and "\n" not in value


def _is_branch(value: str) -> bool:
    return bool(value) and not value.startswith("-") and all(part not in value for part in ("..", " ", ":", "\n"))


SETTINGS: tuple[Setting, ...] = (
    # Evolve modes and the evolve schedule (enact.evolution.modes).
    Setting("evolve.mode", str, "co-evolve", "What scheduled evolve runs may do until `enact evolve mode` sets it",
            one_of("disabled", "co-evolve", "auto-evolve")),
    Setting("evolve.schedule", str, "daily 09:00", "When the scheduled evolve run is due",
            Check(SCHEDULE_FORMS, _is_evolve_schedule)),
    Setting("evolve.theme", str, "", "What brainstorming (auto-evolve) starts from; empty: the mission"),
    Setting("evolve.report_to", str, "", "The conversation evolve reports go to; empty: the locked one",
            Check("empty or a conversation key channel:id", lambda value: value == "" or _is_conversation(value))),
    # Evolution (the EvidenceScanner actor).
    Setting("evolve.scan_batch", int, 20, "Turns or tasks one evidence scan sends to the model", between(1, 100)),
    # The lineage inbox (enact.evolution.lineage_actor).
    Setting("lineage.parent", str, "", "The parent agent's git repository (a path or a URL git can fetch); "
            "empty: no lineage", Check("empty, or a path or URL not starting with -", _is_parent)),
    Setting("lineage.branch", str, "main", "The parent's branch whose first-parent history is followed",
            Check("a branch name", _is_branch)),
    Setting("lineage.since", str, "", "The parent revision already taken in, until a scan or "
            "`enact lineage reset` records one; empty: the first scan starts from the branch's head"),
    Setting("lineage.max_commits", int, 20, "Parent changes one lineage scan assesses", between(1, 200)),
    Setting("lineage.max_diff_bytes", int, 60_000, "Bytes of one parent change's diff a model reads",
            between(1_000, 1_000_000)),
    Setting("lineage.scan_timeout_s", float, 1_800.0, "Longest one lineage scan (its fetch and its model calls) "
            "takes; the changes it left are the next scan's. `enact lineage scan` and the evolve run wait that "
            "long plus control.request_timeout_s", between(10, 86_400)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvolutionSettings:
    mode: EvolveMode
    """The mode until the owner sets one (``enact evolve mode``)."""
    schedule: str
    """As written; its check made sure ``enact.schedules.parse`` reads it."""
    theme: str
    report_to: str
    scan_batch: int

    @classmethod
    def from_config(cls, config: Config) -> EvolutionSettings:
        values = config.values
        return cls(mode=EvolveMode(values["evolve.mode"]), schedule=values["evolve.schedule"],
                   theme=values["evolve.theme"], report_to=values["evolve.report_to"],
                   scan_batch=values["evolve.scan_batch"])


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageSettings:
    parent: str
    branch: str
    since: str
    max_commits: int
    max_diff_bytes: int
    scan_timeout_s: float = 1_800.0

    @classmethod
    def from_config(cls, config: Config) -> LineageSettings:
        values = config.values
        return cls(parent=values["lineage.parent"].strip(), branch=values["lineage.branch"],
                   since=values["lineage.since"].strip(), max_commits=values["lineage.max_commits"],
                   max_diff_bytes=values["lineage.max_diff_bytes"], scan_timeout_s=values["lineage.scan_timeout_s"])
