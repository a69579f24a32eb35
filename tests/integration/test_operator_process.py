"""The one operator launcher on the real cluster: attached dies with its parent, detached outlives it.

A separate Python process starts the operator and ends; this test then looks for the
operator by the identity (pid + start time) that process printed, as ``operatorlab lab
check`` finds the operator ``operatorlab lab start`` left running.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from operatorlab.cluster import process
from operatorlab.cluster.process import Identity
from operatorlab.operators import OperatorProcess
from operatorlab.wait import eventually

# An operator with no resource handlers: kopf starts, serves its liveness probe, touches nothing.
IDLE_OPERATOR = '''
import kopf


@kopf.on.startup()
def started(logger, **_):
    logger.info("idle operator up")
'''


def _start_in_another_process(path: Path, log: Path, *, attached: bool, then: str) -> Identity:
    """Start ``path`` from a child interpreter that prints the operator's identity, then does ``then``."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from operatorlab.operators import OperatorProcess
        op = OperatorProcess(Path({str(path)!r}), log_path=Path({str(log)!r}), attached={attached}).start()
        print(op.identity.pid, op.identity.started, flush=True)
        {then}
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90,
                          env=os.environ.copy())
    pid, started = done.stdout.split()
    return Identity(int(pid), started)


def test_a_detached_operator_outlives_its_starter_and_is_stopped_by_identity(tmp_path):
    path = tmp_path / "idle_operator.py"
    path.write_text(IDLE_OPERATOR)
    identity = _start_in_another_process(path, tmp_path / "op.log", attached=False, then="sys.exit(0)")
    try:
        assert identity.alive, "the detached operator died with the process that started it"
        found = OperatorProcess(path, identity=identity, log_path=tmp_path / "op.log", attached=False)
        assert found.running and "idle operator up" in found.log()
        found.stop()
        assert not identity.alive
    finally:
        identity.stop(timeout=5)


def test_an_attached_operator_dies_with_its_parent_even_when_the_parent_is_sigkilled(tmp_path):
    path = tmp_path / "idle_operator.py"
    path.write_text(IDLE_OPERATOR)
    identity = _start_in_another_process(path, tmp_path / "op.log", attached=True,
                                         then="os.kill(os.getpid(), signal.SIGKILL)")
    try:
        eventually(lambda: not identity.alive, timeout=10, message="the attached operator died with its parent")
    finally:
        identity.stop(timeout=5)


def test_a_recycled_pid_is_not_mistaken_for_the_recorded_process():
    me = Identity.of(os.getpid())
    assert me.alive
    assert not Identity(me.pid, str(int(me.started) + 1)).alive
    Identity(me.pid, str(int(me.started) + 1)).stop(sig=signal.SIGKILL)  # not us: nothing happens
    assert me.alive


def test_a_probe_port_taken_before_kopf_binds_it_is_chosen_again(tmp_path, monkeypatch):
    """Between choosing the liveness port and kopf binding it, another process may take it."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    choices = iter([taken.getsockname()[1]])
    real_free_port = process.free_port
    monkeypatch.setattr(process, "free_port", lambda: next(choices, None) or real_free_port())
    path = tmp_path / "idle_operator.py"
    path.write_text(IDLE_OPERATOR)
    op = OperatorProcess(path, log_path=tmp_path / "op.log")
    try:
        op.start()
        assert op.liveness_port != taken.getsockname()[1]
        assert "address already in use" in op.log(), "the first attempt did not meet the taken port"
    finally:
        op.stop()
        taken.close()


def test_free_ports_are_chosen_below_the_range_outgoing_connections_use():
    for _ in range(20):
        port = process.free_port()
        assert port not in process.ephemeral_ports() and process.port_free(port)
