"""The Tracer collects result records as the simulation runs.

Recording everything costs memory: a ring allreduce over 1024 ranks sends two million
messages. Each kind of record can therefore be switched off; counters stay exact either way.
An optional text log prints one line per event with the simulated time first
(``[   12.345 us] rank 3 allreduce/ring: step 2 send 4 KiB -> 4``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from mpisim.engine.records import CollectiveRecord, LinkRecord, MessageRecord, SpanRecord


class Tracer:
    """Collects records of messages, rank activity spans, collectives and link activity."""

    def __init__(
        self,
        *,
        messages: bool = True,
        spans: bool = True,
        links: bool = False,
        log: TextIO | None = None,
        now: Callable[[], float] | None = None,
        budget: int | None = None,
    ) -> None:
        #: At most this many records of each kind; past it every kind stops and is dropped
        #: (counters stay exact), so memory stays flat on runs nobody asked to trace in full --
        #: a program calling MPI for ever included.
        self.budget = budget
        #: True once the budget was exceeded and the records were dropped.
        self.over_budget = False
        self.record_messages = messages
        self.record_spans = spans
        self.record_links = links
        self.record_collectives = True
        self.messages: list[MessageRecord] = []
        self.spans: list[SpanRecord] = []
        self.collectives: list[CollectiveRecord] = []
        self.links: list[LinkRecord] = []
        self.message_count = 0
        self.message_bytes = 0
        self._log = log
        self._now = now or (lambda: 0.0)

    def message(self, record: MessageRecord) -> None:
        """Count a finished message and keep its record if messages are recorded."""
        self.message_count += 1
        self.message_bytes += record.nbytes
        if self.record_messages:
            self.messages.append(record)
            if self.budget is not None and len(self.messages) > self.budget:
                self._drop_records()

    def count_message(self, nbytes: int) -> None:
        """Count a finished message whose record is not kept (``record_messages`` is off)."""
        self.message_count += 1
        self.message_bytes += nbytes

    def count_messages(self, count: int, nbytes: int) -> None:
        """Count *count* messages of *nbytes* in all that a model stood in for without sending them
        (a step program's, a fluid tree's): their records are not kept."""
        self.message_count += count
        self.message_bytes += nbytes

    def span(self, record: SpanRecord) -> None:
        """Keep a rank activity span if spans are recorded (zero-length spans are dropped)."""
        if self.record_spans and record.t_end > record.t_start:
            self.spans.append(record)
            if self.budget is not None and len(self.spans) > self.budget:
                self._drop_records()

    def _drop_records(self) -> None:
        """Over budget: stop keeping records of every kind and drop those kept (a partial timeline misleads)."""
        self.over_budget = True
        self.record_messages = self.record_spans = self.record_links = self.record_collectives = False
        self.messages.clear()
        self.spans.clear()
        self.collectives.clear()
        self.links.clear()

    def collective(self, record: CollectiveRecord) -> None:
        """Keep a collective record (until the budget: a program may call collectives for ever)."""
        if self.record_collectives:
            self.collectives.append(record)
            if self.budget is not None and len(self.collectives) > self.budget:
                self._drop_records()

    def link(self, record: LinkRecord) -> None:
        """Keep a link activity record if link activity is recorded."""
        if self.record_links:
            self.links.append(record)
            if self.budget is not None and len(self.links) > self.budget:
                self._drop_records()

    def log(self, scope: str, text: str) -> None:
        """Write one log line, simulated time first, if a text log is attached."""
        if self._log is not None:
            t_us = self._now() * 1e6
            self._log.write(f"[{t_us:12.3f} us] {scope}: {text}\n")
