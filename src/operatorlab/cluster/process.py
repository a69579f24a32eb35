"""Start and stop long-running processes that outlive the Python process that started them.

Each process gets its own session (so its process group id equals its pid and a
signal to the group reaches any children), and its stdout and stderr go to one log
file. A process that must be found again by another command (a lab's operator, the
fault proxy) is remembered by its :class:`Identity`, pid *and* kernel start time, so
a recycled pid is never mistaken for it (we never ``pkill -f``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# Popen objects of the processes this interpreter started: lets us reap them, so a
# stopped child does not linger as a zombie that still answers kill(pid, 0).
_children: dict[int, subprocess.Popen] = {}


def spawn(argv: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None,
          die_with_parent: bool = False) -> int:
    """Start ``argv`` detached in its own session, appending output to ``log``.

    Args:
        die_with_parent: have the kernel SIGTERM the process when the thread that started
            it dies (Linux ``PR_SET_PDEATHSIG``), even if that thread's process is SIGKILLed.
            Only honoured from the main thread, since a worker thread's exit would trigger it.

    Returns:
        The pid (also the process-group id).

    Raises:
        FileNotFoundError: ``argv[0]`` does not exist.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env, cwd=cwd,
            preexec_fn=_die_with_parent if die_with_parent and _in_main_thread() else None,
        )
    _children[proc.pid] = proc
    return proc.pid


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def is_running(pid: int | None, executable: str | Path | None = None) -> bool:
    """Whether ``pid`` is alive (not a zombie) and, if given, runs ``executable``."""
    if not pid:
        return False
    if (child := _children.get(pid)) is not None:
        # Our own child: ask the kernel directly. (Between fork and exec its cmdline is
        # still ours, so the executable check below would wrongly say "not running".)
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        if executable is not None:
            exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
            return Path(exe) == Path(executable)
        return True
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except PermissionError:  # someone else's process with that pid: not ours
        return False


def stop(pid: int | None, executable: str | Path | None = None, *, timeout: float = 15.0,
         sig: int = signal.SIGTERM) -> None:
    """Signal the process group of ``pid`` (SIGTERM by default), then SIGKILL after ``timeout`` s.

    Does nothing if the process is already gone or is not ``executable``.
    """
    if not pid or not is_running(pid, executable):
        _reap(pid)
        return
    _signal_group(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            break
        time.sleep(0.1)
    else:
        _signal_group(pid, signal.SIGKILL)
        while is_running(pid):
            time.sleep(0.05)
    _reap(pid)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def _reap(pid: int | None) -> None:
    if pid and (child := _children.pop(pid, None)) is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def tail(log: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (empty string if none): for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def ephemeral_ports() -> range:
    """The kernel's range for the local end of outgoing connections (Linux; else the usual default)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing uses right now, chosen *below* the ephemeral range.

    Binding port 0 would let the kernel pick one, but from the very range it hands out
    for the local end of every outgoing connection: between our check and the server's
    own bind, any client connecting somewhere (a test run opens thousands) may take it,
    and the server dies with EADDRINUSE. A port below the range is only ever taken by a
    server that asks for it by number.
    """
    ephemeral = ephemeral_ports()
    pool = range(20000, ephemeral.start) if ephemeral.start > 21000 else range(0)
    for _ in range(50):
        if not pool:
            break
        port = random.choice(pool)
        if port_free(port):
            return port
    with socket.socket() as s:  # no room below the range: let the kernel pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lost_port_race(log: Path) -> bool:
    """Whether the server logging to ``log`` exited because its port was taken before it bound it.

    :func:`free_port` chooses a port, it cannot reserve it: another program may bind it
    first. Go (``bind: address already in use``), aiohttp and Python (``[Errno 98]
    Address already in use``) all say so in words, so a caller may choose again.
    """
    return "address already in use" in tail(log, 5).lower()


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` right now (so we may bind it)."""
    with socket.socket() as s:
        # As the servers themselves do (Go sets it): connections lingering in TIME_WAIT
        # from a stopped server do not keep its port taken.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# -- identity: a process found again by another command ------------------------------------


def start_time(pid: int | None) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), or None if it is gone.

    A pid plus its start time names one process for good: a recycled pid has another start
    time. (The executable path cannot: between fork and exec the child still shows its
    parent's command line, and a lab's processes outlive the command that started them.)
    """
    if not pid:
        return None
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


@dataclass(frozen=True)
class Identity:
    """One process for good: its pid and the kernel's start time of that pid.

    Recorded in a file by the command that started the process, so a later command
    (``operatorlab lab reset``, the fault proxy killing an operator) can signal that
    very process and never another that happens to have the same pid by now.
    """

    pid: int
    started: str

    @classmethod
    def of(cls, pid: int) -> Identity:
        """The identity of the live process ``pid``.

        Raises:
            ProcessLookupError: ``pid`` is not running.
        """
        started = start_time(pid)
        if started is None:
            raise ProcessLookupError(f"no process {pid}")
        return cls(pid, started)

    @property
    def alive(self) -> bool:
        """Alive (not a zombie) and still the very process recorded."""
        return is_running(self.pid) and start_time(self.pid) == self.started

    def stop(self, *, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        """Signal it (then SIGKILL after ``timeout``); nothing if it is gone or the pid was reused."""
        if self.alive:
            stop(self.pid, sig=sig, timeout=timeout)
        else:
            _reap(self.pid)

    def kill(self) -> bool:
        """SIGKILL the process itself, at once and without waiting; True if it was alive.

        Only the process, not its group: the fault proxy calls this from its event loop
        between receiving a response and relaying it, and must not block.
        """
        if not self.alive:
            return False
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True
