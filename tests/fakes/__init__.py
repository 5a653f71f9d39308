"""Local fakes of external services, shared by the tests (and the recording proxy's tests)."""

from tests.fakes.answers import Answer, Call, Choice, Fault, Reply, Step, answer
from tests.fakes.provider import Exchange, FakeProvider

__all__ = [
    "Answer",
    "Call",
    "Choice",
    "Exchange",
    "FakeProvider",
    "Fault",
    "Reply",
    "Step",
    "answer",
]
