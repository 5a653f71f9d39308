"""Worker processes of a parallel job (`lithify convert`, `import` and `export`): each its own
interpreter on one end of a socket pair, the messages between them, and what a worker that died
became.

A worker is started with ``python -c``, not multiprocessing's spawn, which would run a library
caller's main module again (a script without a ``__main__`` guard would do its work twice).
A message is an 8-byte little-endian length, then the bytes, read straight into one buffer: an
export's rows (1 GB for 100,000 calls) are copied once on their way to the file, where a pickled
list of rows through ``multiprocessing.connection`` was copied four times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket
    import subprocess

# The commands that may start workers catch ``WorkerDied`` whether they do or not: what only a
# worker needs (sockets, processes, pickles, ≈9 ms) is imported where it is used.


class WorkerDied(RuntimeError):
    """A worker process ended before its work was handed back (killed, out of memory)."""


class Closed(EOFError):
    """The process at the other end of a socket has closed it (ended, or was killed)."""


class Failed:
    """An error a worker met, handed back for the process that started it to raise."""

    __slots__ = ("error",)  # a plain class: a NamedTuple took 1 ms to define, at every start

    def __init__(self, error: BaseException) -> None:
        self.error = error


def start(program: str) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """A worker running ``program`` (Python source, given the socket's descriptor as
    ``sys.argv[1]``), and this process's end of its socket."""
    import socket
    import subprocess
    import sys

    ours, theirs = socket.socketpair()
    fd = theirs.fileno()
    # Not this process's stdin or stdout (a pipe reading the output waits for every holder of
    # its end); stderr stays, for what a worker cannot hand back.
    dev = subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", program, str(fd)], pass_fds=(fd,), stdin=dev, stdout=dev
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return ours, proc


def send(sock: socket.socket, data: bytes | bytearray) -> None:
    try:
        sock.sendall(len(data).to_bytes(8, "little"))
        if data:  # the other side may be gone once it has the length of an empty message
            sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError) as e:
        raise Closed("the other process closed its end") from e


def send_each(sock: socket.socket, messages: list[bytes]) -> None:
    for message in messages:
        send(sock, message)


def recv(sock: socket.socket) -> bytearray:
    """The next message; ``Closed`` when the other side has closed."""
    head = _fill(sock, bytearray(8))
    return _fill(sock, bytearray(int.from_bytes(head, "little")))


def _fill(sock: socket.socket, buf: bytearray) -> bytearray:
    view = memoryview(buf)
    while view:
        try:
            got = sock.recv_into(view)
        except ConnectionResetError as e:  # it left what was sent to it unread
            raise Closed("the other process closed its end") from e
        if not got:
            raise Closed("the other process closed its end")
        view = view[got:]
    return buf


def failure(error: BaseException) -> bytes:
    """``error`` pickled as a ``Failed`` message; an error that does not pickle, by its text."""
    import pickle

    try:
        return pickle.dumps(Failed(error), protocol=5)
    except Exception:
        return pickle.dumps(Failed(RuntimeError(f"{type(error).__name__}: {error}")), protocol=5)


def received(sock: socket.socket) -> Any:
    """The next message unpickled; a worker's ``Failed`` error is raised here, as it was."""
    import pickle

    got = pickle.loads(recv(sock))
    if isinstance(got, Failed):
        raise got.error
    return got


def died(procs: list[subprocess.Popen[bytes]], who: str) -> str:
    """What became of ``who`` (say, "an export worker process"), one of ``procs``, whose socket
    closed before its work was done: its exit is seen a moment after its socket's close."""
    import signal
    import time

    for _ in range(100):
        code = next((c for c in (proc.poll() for proc in procs) if c), None)
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            hint = " (the system may have run out of memory)" if -code == signal.SIGKILL else ""
            return f"{who} was killed by {name}{hint}"
        if code is not None:
            return f"{who} exited with code {code}"
        time.sleep(0.05)
    return f"{who} closed its end before its work was handed back"
