"""One retry policy: exponential back-off with a ceiling and an attempt limit.

Attempts are counted from 1 (the first try). ``delay(n)`` is the wait after
attempt ``n`` failed, before attempt ``n + 1``; ``exhausted(n)`` says attempt
``n`` was the last one allowed.
"""

from __future__ import annotations

import math

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    first_s: float
    factor: float = 2.0
    max_s: float = math.inf
    attempts: int = 1

    def __post_init__(self) -> None:
        if self.first_s < 0 or self.factor < 1 or self.max_s < 0 or self.attempts < 1:
            raise ValueError(f"not a back-off policy: {self!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` failed."""
        exponent = max(0, attempt - 1)
        if self.factor > 1 and exponent > 1000:
            return self.max_s  # factor ** exponent would overflow
        return min(self.max_s, self.first_s * self.factor**exponent)

    def exhausted(self, attempt: int) -> bool:
        """No attempt may follow attempt ``attempt``."""
        return attempt >= self.attempts
