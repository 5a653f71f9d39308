"""Worker processes (``lithify.core.workers``): the messages between them, an error handed
back, and what a worker that died became."""

from __future__ import annotations

import os
import socket
import subprocess
import threading

import pytest

from lithify.core import workers


def test_messages_arrive_whole_and_in_order() -> None:
    # Sizes past what one socket call moves (a few hundred KB), and the empty message that
    # ends a worker's input.
    messages = [b"", b"x", os.urandom(5 << 20), bytearray(b"b" * 70_000), b""]
    ours, theirs = socket.socketpair()

    def send() -> None:
        workers.send_each(ours, messages)
        ours.close()

    sender = threading.Thread(target=send)
    sender.start()
    got = [workers.recv(theirs) for _ in messages]
    sender.join()
    assert got == messages
    with pytest.raises(workers.Closed):
        workers.recv(theirs)
    theirs.close()


def test_a_message_to_a_closed_end_or_cut_short_is_closed() -> None:
    ours, theirs = socket.socketpair()
    theirs.close()
    with pytest.raises(workers.Closed):
        workers.send(ours, b"x" * (1 << 20))
    ours.close()
    ours, theirs = socket.socketpair()
    ours.sendall((100).to_bytes(8, "little") + b"only part")
    ours.close()
    with pytest.raises(workers.Closed):
        workers.recv(theirs)
    theirs.close()


class _Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("held a lock")
        self.lock = threading.Lock()


def test_an_error_is_raised_as_it_was_or_by_its_text() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        workers.send(ours, workers.failure(EOFError("cut short")))
        with pytest.raises(EOFError, match="cut short") as e:
            workers.received(theirs)
        assert not isinstance(e.value, workers.Closed)
        workers.send(ours, workers.failure(_Unpicklable()))
        with pytest.raises(RuntimeError, match=r"^_Unpicklable: held a lock$"):
            workers.received(theirs)


def _ended(program: str) -> subprocess.Popen[bytes]:
    sock, proc = workers.start(program)
    with sock, pytest.raises(workers.Closed):
        workers.recv(sock)
    return proc


@pytest.mark.parametrize(
    ("program", "said"),
    [
        ("import sys; sys.exit(3)", "a test worker exited with code 3"),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            "a test worker was killed by SIGKILL (the system may have run out of memory)",
        ),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
            "a test worker was killed by SIGTERM",
        ),
    ],
)
def test_a_worker_that_ended_is_said_with_its_exit(program: str, said: str) -> None:
    proc = _ended(program)
    assert workers.died([proc], "a test worker") == said


def test_a_worker_is_its_own_interpreter_on_the_socket_it_is_given() -> None:
    program = (
        "import socket, sys; from lithify.core import workers\n"
        "s = socket.socket(fileno=int(sys.argv[1]))\n"
        "workers.send(s, workers.recv(s)[::-1] + sys.stdin.read().encode())"
    )
    sock, proc = workers.start(program)
    with sock:
        workers.send(sock, b"abc")
        assert workers.recv(sock) == b"cba"  # stdin is not this process's: it reads nothing
    assert proc.wait() == 0
