"""Start JupyterLab so that its terminals, not only its kernels, talk to the lab's cluster.

A kernel inherits the server's environment, so ``KUBECONFIG`` reaches every notebook.
A terminal does not keep it whole: jupyter_server_terminals (0.5, ``app.py``) starts
``$SHELL -l`` when no ``shell_command`` is configured, and a login shell reads
``/etc/profile``, which on Debian and Ubuntu sets ``PATH`` afresh. The built kubectl
then drops off ``PATH`` and the terminal finds another kubectl of another version, or
none. So the server is given a ``shell_command``: an interactive bash that reads what a
login shell reads and then, last, puts the cluster's kubectl first and exports
``KUBECONFIG``. The files live in ``<cache>/jupyter/<cluster>/``, one set per cluster (a
test session must not repoint a learner's terminals), rewritten on each start.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from operatorlab import kubectl, paths

#: The lesson a first start opens (instead of JupyterLab's Launcher).
FIRST_NOTEBOOK = "00-your-cluster.ipynb"


def terminal_rc(env: Mapping[str, str], path_first: list[Path]) -> str:
    """A bash rc file: the login files first, then the cluster's environment on top.

    Args:
        env: variables to export (``KUBECONFIG``, ``KUBEBUILDER_ASSETS``).
        path_first: directories put before everything else on ``PATH``, in order.
    """
    exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items() if value)
    prefix = ":".join(shlex.quote(str(p)) for p in path_first)
    return (
        "# Written by `operatorlab jupyter` for JupyterLab's terminals; rewritten on each start.\n"
        "# What a login shell reads (it may reset PATH) ...\n"
        "[ -r /etc/profile ] && . /etc/profile\n"
        'for f in ~/.bash_profile ~/.bash_login ~/.profile; do [ -r "$f" ] && { . "$f"; break; }; done\n'
        "# ... then the lab's cluster on top, so it wins.\n"
        f"{exports}"
        f'export PATH={prefix}:"$PATH"\n'
    )


# The JupyterLab plugin that asks for consent to fetch Jupyter news, and checks for updates.
ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"


def prepare(cluster_name: str, env: Mapping[str, str], *, venv_bin: Path, root: Path | None = None) -> Path:
    """Write the terminal rc file and a Jupyter config dir that uses it; return the config dir.

    Put the returned directory on ``JUPYTER_CONFIG_PATH`` for the server. The kubectl is
    the one :func:`operatorlab.kubectl.executable` picks in this process's environment,
    so call this with the cluster's environment already in ``os.environ``. Without bash
    (e.g. an Alpine image) nothing is configured and the terminals keep their default.

    Raises:
        FileNotFoundError: no kubectl anywhere (the message says how to get one).
    """
    root = (paths.cache_root() / "jupyter" / cluster_name) if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    settings: dict[str, list[str]] = {}
    if bash := shutil.which("bash"):
        kubectl_dir = Path(kubectl.executable()).parent
        rc = root / "terminal.bashrc"
        rc.write_text(terminal_rc(env, [kubectl_dir, venv_bin]))
        settings["shell_command"] = [bash, "--rcfile", str(rc), "-i"]
    config = {"ServerApp": {"terminado_settings": settings}}
    (root / "jupyter_server_config.json").write_text(json.dumps(config, indent=1) + "\n")
    # No "get notified about Jupyter news?" prompt over the lesson: JupyterLab's announcements
    # plugin disabled, as its docs say (user/announcements), in a page config of this dir.
    (root / "labconfig").mkdir(exist_ok=True)
    page = {"disabledExtensions": {ANNOUNCEMENTS: True}}
    (root / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1) + "\n")
    return root
