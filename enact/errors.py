"""The root of every exception enact defines.

An exception means a defect or an infrastructure failure; an expected refusal
is a reply (``enact.messages.common.Refused``, ``NotFound``), never one of
these. Every exception class of enact derives from ``EnactError`` (besides
the built-in class that says what kind of failure it is, ``ValueError``,
``TimeoutError``, …), so that a caller can tell enact's own failures from
a library's or Python's, and ``tests/test_failure.py`` keeps it so.
"""

from __future__ import annotations


class EnactError(Exception):
    """A failure enact itself raises."""
