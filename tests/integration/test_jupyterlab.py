"""JupyterLab's terminals use the cluster's kubectl and KUBECONFIG, as its kernels do.

Starts ``operatorlab jupyter`` (what ``make lab`` runs) against the session's cluster,
opens a terminal through the server's own REST and websocket API (what the browser does)
and runs commands in it. The control case starts the same server without the terminal
settings: on a system whose ``/etc/profile`` sets ``PATH`` (Debian, Ubuntu), its login
shell has lost the cluster's kubectl.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tornado.websocket import websocket_connect

from operatorlab import jupyterlab, kubectl
from operatorlab.cluster import current, process

TOKEN = uuid.uuid4().hex


@contextmanager
def _serve(argv: list[str], env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    out = log.open("w")
    server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)  # noqa: S310 -- our own server
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start; its log:\n{log.read_text()}")
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        out.close()


def _server_args(port: int) -> list[str]:
    return ["--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
            "--ServerApp.open_browser=False", *(["--allow-root"] if os.getuid() == 0 else [])]


def _run_in_terminal(url: str, command: str) -> str:
    """Open a terminal, type ``command``, return what it printed between two markers."""
    request = urllib.request.Request(f"{url}/api/terminals?token={TOKEN}", method="POST", data=b"")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 -- our own server
        name = json.load(response)["name"]

    async def talk() -> str:
        ws_url = url.replace("http", "ws", 1) + f"/terminals/websocket/{name}?token={TOKEN}"
        connection = await websocket_connect(ws_url)
        connection.write_message(json.dumps(["stdin", f"echo BEGIN-$((1+1)); {command}; echo END-$((2+2))\r"]))
        seen = ""
        deadline = time.monotonic() + 30
        while "END-4" not in seen.split("BEGIN-2", 1)[-1] and time.monotonic() < deadline:
            message = await asyncio.wait_for(connection.read_message(), timeout=30)
            if message is None:
                break
            kind, *payload = json.loads(message)
            if kind == "stdout":
                seen += payload[0]
        connection.close()
        # "BEGIN-2"/"END-4" appear only in the output (the typed line shows $((...))).
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.split("BEGIN-2", 1)[-1].split("END-4", 1)[0])

    return asyncio.run(talk())


@pytest.fixture
def cluster_env() -> dict[str, str]:
    cluster = current()
    return {**os.environ, **{k: v for k, v in cluster.env().items() if v}}


def test_a_terminal_gets_the_cluster_kubectl_and_kubeconfig(tmp_path: Path, cluster_env: dict[str, str]) -> None:
    cluster = current()
    port = process.free_port()
    argv = [sys.executable, "-m", "operatorlab.cli", "jupyter", "--name", cluster.name, *_server_args(port)]
    env = {**cluster_env, "OPERATORLAB_CLUSTER": cluster.provider}
    with _serve(argv, env, port, tmp_path / "server.log") as url:
        printed = _run_in_terminal(
            url, "command -v kubectl; echo KUBECONFIG=$KUBECONFIG; kubectl get namespace default -o name")
        with urllib.request.urlopen(f"{url}/lab?token={TOKEN}", timeout=30) as page:  # noqa: S310 -- our own server
            html = page.read().decode()
    # The page the browser loads: JupyterLab's news prompt is off, so nothing covers the lesson.
    page_config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                       html, re.DOTALL).group(1))
    assert jupyterlab.ANNOUNCEMENTS in page_config["disabledExtensions"], page_config["disabledExtensions"]
    expected_kubectl = kubectl.executable()
    assert expected_kubectl in printed, printed
    assert f"KUBECONFIG={cluster.kubeconfig}" in printed, printed
    assert "namespace/default" in printed, printed
    assert "00-your-cluster.ipynb" in (tmp_path / "server.log").read_text(), "lesson 00 is opened first"


def test_without_the_settings_a_login_shell_loses_the_cluster_kubectl(
    tmp_path: Path, cluster_env: dict[str, str]
) -> None:
    """The control case: why the terminal settings exist."""
    profile = Path("/etc/profile")
    resets_path = profile.is_file() and re.search(r"^\s*PATH=", profile.read_text(), re.MULTILINE)
    expected_kubectl = kubectl.executable()
    port = process.free_port()
    env = {**cluster_env, "PATH": f"{Path(expected_kubectl).parent}{os.pathsep}{cluster_env['PATH']}"}
    argv = [str(Path(sys.executable).parent / "jupyter"), "server", *_server_args(port)]
    with _serve(argv, env, port, tmp_path / "server.log") as url:
        printed = _run_in_terminal(url, "echo PATH=$PATH")
    path = [entry.strip() for entry in printed.split("PATH=", 1)[-1].split(os.pathsep)]
    on_path = Path(expected_kubectl).parent.as_posix() in path
    assert on_path is not bool(resets_path), printed
