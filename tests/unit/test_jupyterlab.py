"""The rc file JupyterLab's terminals start with: login files first, the cluster last."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from operatorlab.jupyterlab import terminal_rc


def test_the_cluster_wins_over_what_the_login_files_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A login file that resets PATH and points KUBECONFIG elsewhere, as /etc/profile or ~/.profile may.
    (home / ".profile").write_text("PATH=/usr/bin:/bin\nexport KUBECONFIG=/elsewhere\n")
    kubectl_dir = tmp_path / "cluster bin"  # a space: the rc file must quote
    rc = tmp_path / "rc"
    rc.write_text(terminal_rc({"KUBECONFIG": "/the/cluster/kubeconfig", "UNSET": ""}, [kubectl_dir, tmp_path / "venv"]))
    shown = subprocess.run(
        ["bash", "-c", f". {rc}; echo \"$PATH\"; echo \"$KUBECONFIG\"; echo \"${{UNSET-unset}}\""],
        env={"HOME": str(home), "PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    assert shown[0].split(":")[:2] == [str(kubectl_dir), str(tmp_path / "venv")]
    assert shown[1] == "/the/cluster/kubeconfig"
    assert shown[2] == "unset", "an empty value is not exported"
