"""Find the control-plane binaries, or build them from Go modules.

Lookup order follows envtest's convention (controller-runtime
``pkg/internal/testing/process/bin_path_finder.go``): ``$KUBEBUILDER_ASSETS`` if
set, else the lab's own cache ``<cache>/<kubernetes-version>/bin`` filled by
``controlplane/build.sh``.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from operatorlab import paths

#: Every executable a local cluster needs.
NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")


class BinariesMissing(RuntimeError):
    """The control-plane binaries are not built yet (the message says how to build them)."""


@dataclass(frozen=True)
class Binaries:
    """A directory holding every binary in :data:`NAMES` (plus ``kwok-stages/``)."""

    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name

    @property
    def kwok_stages(self) -> Path:
        return self.dir / "kwok-stages"

    def missing(self) -> list[str]:
        missing = [n for n in NAMES if not os.access(self.path(n), os.X_OK)]
        if not (self.kwok_stages / "pod-ready.yaml").is_file():
            missing.append("kwok-stages/")  # kwok refuses to start without stages
        return missing


def kubernetes_version() -> str:
    """The pinned ``k8s.io/kubernetes`` version, read from ``controlplane/kubernetes/go.mod``."""
    go_mod = (paths.repo_root() / "controlplane" / "kubernetes" / "go.mod").read_text()
    match = re.search(r"^require k8s\.io/kubernetes (v\S+)$", go_mod, re.MULTILINE)
    if not match:
        raise RuntimeError("controlplane/kubernetes/go.mod does not pin k8s.io/kubernetes")
    return match.group(1)


def default_dir() -> Path:
    """Where the binaries are (or will be): ``$KUBEBUILDER_ASSETS`` or the versioned cache."""
    if assets := os.environ.get("KUBEBUILDER_ASSETS"):
        return Path(assets)
    return paths.cache_root() / kubernetes_version() / "bin"


def find() -> Binaries:
    """Return the binaries, all present.

    Raises:
        BinariesMissing: some binary is absent; the message names them and the fix.
    """
    binaries = Binaries(default_dir())
    if (missing := binaries.missing()) and os.environ.get("KUBEBUILDER_ASSETS"):
        raise BinariesMissing(
            f"KUBEBUILDER_ASSETS={binaries.dir} lacks {', '.join(missing)}.\n"
            "Point it at a directory holding all of them, or unset it to use the lab's own build:\n"
            "  unset KUBEBUILDER_ASSETS && make setup"
        )
    if missing:
        raise BinariesMissing(
            f"control-plane binaries missing in {binaries.dir}: {', '.join(missing)}.\n"
            "Build them (once, about 15 min cold on 2 cores) with:  make setup"
        )
    return binaries


def build() -> Binaries:
    """Build what is missing with ``controlplane/build.sh``, streaming its progress to stderr.

    Raises:
        subprocess.CalledProcessError: the Go build failed (its output was shown).
    """
    script = paths.repo_root() / "controlplane" / "build.sh"
    result = subprocess.run(["bash", str(script)], check=True, stdout=subprocess.PIPE, text=True)
    return Binaries(Path(result.stdout.strip().splitlines()[-1]))
