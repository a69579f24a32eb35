"""What the JupyterHub image runs, run here unprivileged: the lab needs no root, no capability,
no privilege escalation and no ServiceAccount token.

There is no container engine on this machine, so the image is never built here. This test
runs what the image runs, the way a Zero to JupyterHub pod runs it:

- as a non-root system user (``oplab-learner``, created once when the tests run as root)
  with no capabilities, an empty bounding set and ``no_new_privs`` (what
  ``allowPrivilegeEscalation: false`` sets); when the tests do not run as root, as the
  current user;
- with the image's layout: a HOME the user owns; the course as the Dockerfile copies it
  (tests/jupyterhub_image.py reads which directories) and the control-plane binaries, both
  root-owned and read-only, as in the image; the cache on a path the user owns;
- through workshop/jupyterhub/start.sh, the image's entrypoint: it copies the course into
  HOME and brings the cluster up, then runs the command it is given.

Then, as that user: notebook 00 runs top to bottom (``jupyter nbconvert --execute``), a lab
goes through its life with the CLI (start, check fails, solve, check passes, reset), and the
cluster is deleted. Every control-plane process is checked to run as that user, with no
capability and no_new_privs.

The user must reach this checkout's venv, the interpreter it was made from (pyenv's, under
``/root``, here) and the editable ``src/``: a parent directory that others cannot enter
(``/root`` is 0700) gets ``o+x`` (enter, not list) for the test's duration and its mode back
afterwards.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from operatorlab import paths
from operatorlab.cluster import LocalCluster, binaries, process
from tests import jupyterhub_image as image

pytestmark = [pytest.mark.xdist_group("jupyterhub-unprivileged"),
              pytest.mark.long,  # an image of its own, a cluster of its own
              pytest.mark.local_cluster]  # it starts a cluster from the binaries

USER = "oplab-learner"
LAB = "crd-group-mismatch"  # writes the learner's copy of an operator into the course: HOME must be theirs


@dataclass
class Learner:
    """Who runs the image's processes, and the image's layout in a scratch directory."""

    uid: int
    gid: int
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def course(self) -> Path:
        return self.home / "operatorlab"

    def run(self, label: str, argv: list[str], *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as the learner (no capability, no_new_privs when we are root), timed as ``label``."""
        if os.geteuid() == 0:
            argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *argv]
        started = time.monotonic()
        result = subprocess.run(argv, env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout)
        self.timings[label] = time.monotonic() - started
        return result


def _system_user() -> tuple[int, int]:
    """``oplab-learner``'s uid and gid, creating the system user if it does not exist."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", USER], capture_output=True)  # a parallel run may win
        entry = pwd.getpwnam(USER)
    assert entry.pw_uid != 0
    return entry.pw_uid, entry.pw_gid


def _closed_parents(targets: list[Path]) -> list[Path]:
    """Directories above ``targets`` that others cannot enter."""
    closed = set()
    for target in targets:
        for parent in [target, *target.parents]:
            if parent.is_dir() and not parent.stat().st_mode & stat.S_IXOTH:
                closed.add(parent)
    return sorted(closed)


@pytest.fixture
def learner() -> Iterator[Learner]:
    uid, gid = _system_user() if os.geteuid() == 0 else (os.getuid(), os.getgid())
    root = Path(tempfile.mkdtemp(prefix="oplab-hub-"))  # not pytest's tmp_path: that is 0700, root's
    root.chmod(0o755)
    # The image: binaries and course root-owned and read-only; HOME and the cache the user's.
    bins = root / "bin"
    bins.mkdir()
    found = binaries.find()
    for name in binaries.NAMES:
        try:
            os.link(found.path(name), bins / name)  # 400 MB: a hard link when on the same file system
        except OSError:
            shutil.copy2(found.path(name), bins / name)
    shutil.copytree(found.kwok_stages, bins / "kwok-stages")
    source = root / "opt-operatorlab"
    for top in image.course_dirs():
        shutil.copytree(paths.repo_root() / top, source / top,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for left in [*source.glob("labs/*/*_operator.py"), *source.glob("labs/*/operator.env")]:
        left.unlink()  # a lab running in this checkout wrote them; .dockerignore keeps them out of the image
    for owned in (root / "home", root / "cache"):
        owned.mkdir()
        os.chown(owned, uid, gid)
    opened = []
    if os.geteuid() == 0:
        needed = [Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)), paths.repo_root()]
        opened = [(d, d.stat().st_mode) for d in _closed_parents(needed)]
        for directory, mode in opened:
            directory.chmod(mode | stat.S_IXOTH)
    name = f"hub-{uuid.uuid4().hex[:6]}"
    who = Learner(uid, gid, root)
    who.env = {
        "HOME": str(who.home), "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8",
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "OPERATORLAB_SOURCE": str(source), "OPERATORLAB_REPO": str(who.course),
        "OPERATORLAB_CACHE": str(who.cache), "KUBEBUILDER_ASSETS": str(bins),
        "OPERATORLAB_CLUSTER_NAME": name,
    }
    try:
        yield who
    finally:
        cli = [str(Path(sys.executable).with_name("operatorlab"))]
        env = {k: v for k, v in who.env.items() if k != "KUBECONFIG"}
        if (who.cache / "clusters" / name / "kubeconfig").is_file():
            who.env = {**env, "KUBECONFIG": str(who.cache / "clusters" / name / "kubeconfig")}
            who.run("cleanup: lab reset", [*cli, "lab", "reset", LAB])
        who.env = env
        if (who.cache / "clusters" / name).exists():  # the test failed before deleting it
            who.run("cleanup: cluster down", [*cli, "cluster", "down", "--name", name, "--purge"])
        for directory, mode in opened:
            directory.chmod(mode)
        shutil.rmtree(root, ignore_errors=True)
        print("\n[jupyterhub unprivileged] " + ", ".join(f"{k} {v:.1f}s" for k, v in who.timings.items()))


def _credentials(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in lines) if k in ("Uid", "CapEff", "NoNewPrivs")}


def test_the_image_runs_unprivileged(learner):
    python, jupyter = sys.executable, str(Path(sys.executable).with_name("jupyter"))
    cli = [str(Path(sys.executable).with_name("operatorlab"))]
    name = learner.env["OPERATORLAB_CLUSTER_NAME"]
    show_env = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('KUBECONFIG', 'PATH')}))"

    # 1. The entrypoint: the course into HOME, the cluster up, then the server's command (here: print the env).
    started = learner.run("start.sh (course copy + cluster up)", [str(image.START_SCRIPT), python, "-c", show_env])
    assert started.returncode == 0, started.stdout + started.stderr
    exported = json.loads(started.stdout.strip().splitlines()[-1])
    cluster = LocalCluster(name, root=learner.cache / "clusters")
    assert exported["KUBECONFIG"] == str(cluster.kubeconfig)
    assert exported["PATH"].split(":")[0] == learner.env["KUBEBUILDER_ASSETS"]  # kubectl for terminals
    assert (learner.course / "notebooks" / "00-your-cluster.ipynb").is_file()
    assert learner.course.stat().st_uid == learner.uid
    rows = cluster.status()
    assert rows and all(r.healthy for r in rows), rows
    for row in rows:
        assert row.pid is not None
        creds = _credentials(row.pid)
        assert creds["Uid"].split()[0] == str(learner.uid), (row.name, creds)
        if os.geteuid() == 0:
            assert int(creds["CapEff"], 16) == 0 and creds["NoNewPrivs"] == "1", (row.name, creds)
    learner.env = {**learner.env, "KUBECONFIG": exported["KUBECONFIG"], "PATH": exported["PATH"]}

    # 2. A notebook, top to bottom, as JupyterLab's kernel would run it.
    out = learner.home / "executed"
    notebook = learner.run("notebook 00", [jupyter, "nbconvert", "--to", "notebook", "--execute", "--output-dir",
                                           str(out), "--ExecutePreprocessor.timeout=300",
                                           str(learner.course / "notebooks" / "00-your-cluster.ipynb")], timeout=600)
    assert notebook.returncode == 0, notebook.stdout + notebook.stderr
    executed = json.loads((out / "00-your-cluster.ipynb").read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert "kube-apiserver           healthy" in "".join(outputs[0].get("text", ""))

    # 3. A lab's life through the CLI.
    learner_copy = learner.course / "labs" / LAB / "tenant_operator.py"
    lab_start = learner.run("lab start", [*cli, "lab", "start", LAB])
    assert lab_start.returncode == 0, lab_start.stdout + lab_start.stderr
    assert learner_copy.is_file() and learner_copy.stat().st_uid == learner.uid
    broken = learner.run("lab check (broken)", [*cli, "lab", "check", LAB, "--wait", "0"])
    assert broken.returncode == 1 and "FAIL" in broken.stdout, broken.stdout + broken.stderr
    solved = learner.run("lab solve", [*cli, "lab", "solve", LAB])
    assert solved.returncode == 0, solved.stdout + solved.stderr
    fixed = learner.run("lab check (fixed)", [*cli, "lab", "check", LAB])
    assert fixed.returncode == 0 and "FAIL" not in fixed.stdout, fixed.stdout + fixed.stderr
    reset = learner.run("lab reset", [*cli, "lab", "reset", LAB])
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert not learner_copy.exists()

    # 4. Gone, data and all.
    down = learner.run("cluster down --purge", [*cli, "cluster", "down", "--name", name, "--purge"])
    assert down.returncode == 0, down.stdout + down.stderr
    assert not cluster.dir.exists()
    bins = Path(learner.env["KUBEBUILDER_ASSETS"])
    assert not [r.name for r in rows if process.is_running(r.pid, bins / r.name)]  # zombies, if any, are not running
