"""Where a timed check's exclusive hold of the GPU goes (issue 47): wall seconds per step, on the
host's clock. Each step ends in a synchronising call (an event's wait, a copy from the host, a
comparison read back), so its seconds include its GPU work. Facts for the report, not a timing."""
from __future__ import annotations

import time


class Laps:
    """Seconds since the last lap (or since made), added up under each lap's name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._at = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._at, 4)
        self._at = now
