"""What a doctor's test run ran, read from the JUnit XML report pytest
writes (the doctor asks every pytest it starts for one, see
``enact.tasks.doctor``), and the rule that keeps a change from switching
its own checks off: every test the base ran must run on the candidate.

The report is written by the code under test, so it is read with care: at
most ``MAX_REPORT_BYTES``, and a document with a DOCTYPE (entities) is
refused before it is parsed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.safe_files import UnsafeFile, read_bytes_inside

MAX_REPORT_BYTES = 32 * 1024 * 1024
NAMED = 10
"""How many tests a refusal names before it counts the rest."""


class ReportError(EnactError, ValueError):
    """The report is there but cannot be used; one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestRun:
    __test__ = False  # not a pytest test class, whatever its name says

    passed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def ran(self) -> frozenset[str]:
        """The tests that ran (passed, failed or errored): not the skipped."""
        return frozenset(self.passed) | frozenset(self.failed) | frozenset(self.errors)

    @property
    def counts(self) -> str:
        """``277 passed, 2 skipped`` (only the kinds there are), or ``no tests``."""
        parts = [f"{len(ids)} {kind}" for kind, ids in (("passed", self.passed), ("failed", self.failed),
                                                         ("errors", self.errors), ("skipped", self.skipped)) if ids]
        return ", ".join(parts) or "no tests"


def read_junit(path: Path) -> TestRun | None:
    """The run the JUnit XML report at ``path`` describes; None when there
    is no report. Raises ReportError for one that cannot be read."""
    # The report is where the command under test writes: it may have made
    # it a link to a file of the host's, or a FIFO that would never end.
    try:
        data = read_bytes_inside(path.parent, path.name, limit=MAX_REPORT_BYTES)
    except UnsafeFile as error:
        raise ReportError(f"the test report is not read: {error}") from None
    if data is None:
        return None
    if b"<!DOCTYPE" in data.upper() or b"<!ENTITY" in data.upper():
        raise ReportError("the test report declares a DOCTYPE or entities; it is not read")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise ReportError(f"the test report is not valid XML: {error}") from None
    outcomes: dict[str, list[str]] = {"passed": [], "failed": [], "errors": [], "skipped": []}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        kinds = {child.tag for child in case}
        kind = ("errors" if "error" in kinds else "failed" if "failure" in kinds else
                "skipped" if "skipped" in kinds else "passed")
        outcomes[kind].append(name)
    return TestRun(**{kind: tuple(ids) for kind, ids in outcomes.items()})


def not_run(base: TestRun, candidate: TestRun) -> str:
    """Why ``candidate`` does not run what ``base`` ran, naming the tests
    (skipped now, or gone: deleted, renamed or deselected), or "" when it does."""
    skipped = sorted(base.ran & frozenset(candidate.skipped))
    missing = sorted(base.ran - candidate.ran - frozenset(candidate.skipped))
    if not skipped and not missing:
        return ""
    parts = []
    for what, names in (("skipped now", skipped), ("not run at all", missing)):
        if names:
            shown = ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")
            parts.append(f"{len(names)} {what}: {shown}")
    return f"the change runs fewer of the tests the base ran ({'; '.join(parts)})"
