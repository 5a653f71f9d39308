"""`lithify import`: whatever `lithify convert` reads, straight into the fact store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lithify.model import Feedback, InferenceCall
from lithify.store import FactStore, InsertResult, Prepared


@dataclass
class StoreSink:
    """Facts and feedback into a store, one transaction per batch; duplicates are counted, and
    variants (differing captures of stored calls, kept apart) and collisions (new calls that
    share an id with a stored call they contradict) too."""

    store: FactStore
    batch_size: int = 500
    stored: int = 0
    duplicates: int = 0
    variants: int = 0
    collisions: int = 0
    feedback_stored: int = 0
    feedback_duplicates: int = 0
    _facts: list[InferenceCall] = field(default_factory=list)
    _feedback: list[Feedback] = field(default_factory=list)

    def fact(self, call: InferenceCall) -> None:
        self._facts.append(call)
        if len(self._facts) >= self.batch_size:
            self._flush_facts()

    def feedback(self, item: Feedback) -> None:
        self._feedback.append(item)
        if len(self._feedback) >= self.batch_size:
            self._flush_feedback()

    def insert_prepared(self, batches: list[Prepared]) -> None:
        """Rows prepared elsewhere (``FactStore.preparer``), in one transaction, counted."""
        for facts, feedback in self.store.insert_prepared(batches) if batches else ():
            self._count(facts)
            self._count_feedback(feedback)

    def _flush_facts(self) -> None:
        if self._facts:
            self._count(self.store.insert_facts(self._facts))
            self._facts.clear()

    def _flush_feedback(self) -> None:
        if self._feedback:
            self._count_feedback(self.store.insert_feedback(self._feedback))
            self._feedback.clear()

    def _count(self, result: InsertResult) -> None:
        self.stored += result.inserted
        self.duplicates += result.duplicates
        self.variants += result.variants
        self.collisions += result.collisions

    def _count_feedback(self, result: InsertResult) -> None:
        self.feedback_stored += result.inserted
        self.feedback_duplicates += result.duplicates

    def flush(self) -> None:
        self._flush_facts()
        self._flush_feedback()

    def counts(self) -> dict[str, Any]:
        return {
            "stored": self.stored,
            "duplicates": self.duplicates,
            "variants": self.variants,
            "collisions": self.collisions,
            "feedback_stored": self.feedback_stored,
            "feedback_duplicates": self.feedback_duplicates,
        }
