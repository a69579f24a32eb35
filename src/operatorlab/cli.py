"""The ``operatorlab`` command.

::

    operatorlab cluster up [--nodes N] [--no-crds]   start (or reuse) the cluster, apply crds/
    operatorlab cluster down [--purge]               stop it; --purge deletes its state too
    operatorlab cluster status                       each component: pid, port, health
    operatorlab cluster env                          the export line for kubectl in a shell
    operatorlab jupyter [JUPYTER ARGS]               JupyterLab on notebooks/, terminals on the cluster
    operatorlab class [DIR]                          a workshop's progress: learners x labs, in words
    operatorlab operator list                        the operators in operators/
    operatorlab operator run NAME [-n NS]            run one in the foreground (kopf run ...)
    operatorlab lab list|start|check|hint|solve|reset ID    guided labs (operatorlab.labs.cli)
    operatorlab drill list|start ID|check|hint              timed drills
    operatorlab exercise list|check|hint|solution|reset ID  graded exercises (operatorlab.exercises.cli)
    operatorlab doctor [--name NAME]                 is this machine ready? OK or PROBLEM per check, and the fix
    operatorlab why KIND/NAME [-n NS] [--as USER]    why a kopf handler did not fire (or finish) for one object
    operatorlab verify OPERATOR.py --crd C --example E [--unusable U]   grade any operator (operatorlab.verify.cli)

The provider comes from ``$OPERATORLAB_CLUSTER`` (``local`` or ``existing``); see
:func:`operatorlab.cluster.get_cluster`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from operatorlab import jupyterlab, kubectl, operators, paths, progress
from operatorlab.cluster import ClusterError, current, get_cluster
from operatorlab.cluster.binaries import BinariesMissing
from operatorlab.diagnose import doctor, report
from operatorlab.exercises import cli as exercises_cli
from operatorlab.exercises.registry import UnknownExercise
from operatorlab.labs import cli as labs_cli
from operatorlab.terminal import GREEN, RED, YELLOW, color
from operatorlab.verify import cli as verify_cli


def cluster_up(args: argparse.Namespace) -> int:
    cluster = get_cluster(args.name, nodes=args.nodes)
    cluster.up()
    if not args.no_crds:
        from kubernetes import config

        from operatorlab.cluster import manifests

        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        applied = manifests.apply_crds(api, paths.crds_dir())
        print(f"CRDs applied and established: {', '.join(a.split('/')[1] for a in applied)}")
    if cluster.provider == "existing":
        _warn_on_kubectl_skew(cluster.kubeconfig)
    return 0


def _warn_on_kubectl_skew(kubeconfig: os.PathLike[str]) -> None:
    """Warn when the kubectl in use is outside the version skew policy for a cluster we did not build."""
    from kubernetes import client, config

    server = client.VersionApi(config.new_client_from_config(config_file=str(kubeconfig))).get_code().git_version
    try:
        warning = kubectl.skew_warning(kubectl.client_version(), server)
    except FileNotFoundError as e:
        warning = str(e)
    if warning:
        print(color(f"warning: {warning}", YELLOW, stream=sys.stderr), file=sys.stderr)


def cluster_down(args: argparse.Namespace) -> int:
    get_cluster(args.name).down(purge=args.purge)
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    cluster = get_cluster(args.name)
    rows = cluster.status()
    if not rows:
        print(f"{cluster.provider} cluster via {cluster.kubeconfig}: "
              + ("reachable" if cluster.is_up() else "unreachable"))
        return 0 if cluster.is_up() else 1
    if not cluster.kubeconfig.is_file():
        print(f"no cluster {cluster.name!r} yet (nothing in {cluster.kubeconfig.parent}); "
              "start it with: operatorlab cluster up")
        return 1
    print(f"cluster {cluster.name!r} ({cluster.provider}) in {cluster.kubeconfig.parent}")
    print(f"  {'COMPONENT':<24} {'PID':>7} {'PORT':>6}  HEALTH")
    for r in rows:
        health = color("healthy", GREEN) if r.healthy else color("running, unhealthy" if r.running else "stopped", RED)
        print(f"  {r.name:<24} {r.pid or '-':>7} {r.port or '-':>6}  {health}")
    if cluster.is_up():
        print(f"  kubeconfig: {cluster.kubeconfig}")
    return 0 if all(r.healthy for r in rows) else 1


def cluster_env(args: argparse.Namespace) -> int:
    cluster = get_cluster(args.name)
    if not cluster.kubeconfig.is_file():
        raise ClusterError(f"no cluster {cluster.name!r} yet: start it with: operatorlab cluster up")
    env = cluster.env()
    for key, value in env.items():
        if value:
            print(f"export {key}={shlex.quote(value)}")
    if env.get("KUBEBUILDER_ASSETS"):  # the built kubectl, first on PATH
        print(f'export PATH={shlex.quote(env["KUBEBUILDER_ASSETS"])}:"$PATH"')
    return 0


def jupyter(args: argparse.Namespace) -> int:
    """JupyterLab on notebooks/, opening lesson 00, its kernels and terminals on the cluster."""
    cluster = get_cluster(args.name)
    if not cluster.is_up():
        raise ClusterError(f"the {cluster.provider} cluster is not up: start it with: operatorlab cluster up")
    os.environ.update({k: v for k, v in cluster.env().items() if v})
    venv_bin = Path(sys.executable).parent
    config_dir = jupyterlab.prepare(cluster.name, cluster.env(), venv_bin=venv_bin)
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        p for p in (str(config_dir), os.environ.get("JUPYTER_CONFIG_PATH", "")) if p)
    notebooks = paths.repo_root() / "notebooks"
    argv = [str(venv_bin / "jupyter"), "lab", f"--notebook-dir={notebooks}", *args.jupyter_args]
    if os.getuid() == 0 and "--allow-root" not in argv:
        argv.append("--allow-root")
    if not any(not a.startswith("-") for a in args.jupyter_args):  # no file asked for: lesson 00
        argv.append(str(notebooks / jupyterlab.FIRST_NOTEBOOK))
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    os.execvpe(argv[0], argv, os.environ)  # replaces this process: Ctrl-C stops the server


def class_view(args: argparse.Namespace) -> int:
    """What each learner of a workshop passed, from the copies in the class directory."""
    where = args.dir or os.environ.get("OPERATORLAB_CLASS_DIR")
    if not where or not Path(where).is_dir():
        raise ValueError(
            f"no class directory {where or ''}: give one (operatorlab class DIR) or set OPERATORLAB_CLASS_DIR "
            "to the directory the learners' servers share (workshop/jupyterhub/README.md says how)")
    records = progress.class_records(Path(where))
    if not records:
        print(f"no learner has checked anything yet in {where}")
        return 0
    columns, rows = progress.class_table(records)
    widths = [max(len(str(r[i])) for r in [columns, *rows]) for i in range(len(columns))]
    for row in [columns, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def operator_list(_: argparse.Namespace) -> int:
    for name in operators.operator_names():
        print(name)
    return 0


def operator_run(args: argparse.Namespace) -> int:
    argv = operators.kopf_argv(operators.operator_path(args.name), namespaces=args.namespace or (),
                               verbose=args.verbose)
    cluster = get_cluster(args.cluster_name)
    if not cluster.is_up():
        raise ClusterError(f"the {cluster.provider} cluster is not up: start it with: operatorlab cluster up")
    env = {**os.environ, **cluster.env()}
    print("$ kopf " + " ".join(shlex.quote(a) for a in argv[3:]), flush=True)  # argv: python -m kopf ...
    os.execvpe(argv[0], argv, env)  # replaces this process: Ctrl-C goes straight to kopf


def doctor_run(args: argparse.Namespace) -> int:
    cluster = get_cluster(args.name)
    print(f"operatorlab doctor: this machine and the {cluster.provider} cluster {cluster.name!r}", flush=True)
    findings = doctor.run(cluster)
    print(report.render(findings, rank=False))
    print(f"\n{report.summary(findings)}" + (": run the fix: lines above" if report.exit_code(findings) else ""))
    return report.exit_code(findings)


def why_run(args: argparse.Namespace) -> int:
    from kubernetes import config

    from operatorlab.diagnose import evidence, why

    # As kubectl: $KUBECONFIG when set (e.g. by `eval "$(operatorlab cluster env)"`), else the lab's cluster.
    cluster = current()
    kubeconfig = str(cluster.kubeconfig)
    try:
        _, context = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError) as e:
        raise ClusterError(f"cannot read kubeconfig {kubeconfig}: {e}; "
                           "start a cluster with: operatorlab cluster up") from e
    api = config.new_client_from_config(config_file=kubeconfig)
    named = cluster.provider == "local" and cluster.name != "lab"  # for the fix: operator run --cluster-name
    facts = evidence.gather(api, args.target, namespace=args.namespace,
                            default_namespace=context["context"].get("namespace") or "default", as_user=args.as_user,
                            cluster_name=cluster.name if named else None)
    findings = why.diagnose(facts)
    print(why.report(facts, findings))
    return report.exit_code(findings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="operatorlab", description="Operator Lab: Kubernetes controllers, hands on.")
    sub = parser.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="start, stop and inspect the lab's cluster")
    csub = cluster.add_subparsers(dest="action", required=True)
    for action, func, help_ in (
        ("up", cluster_up, "start (or reuse) the cluster and apply the CRDs"),
        ("down", cluster_down, "stop every component"),
        ("status", cluster_status, "show each component's pid, port and health"),
        ("env", cluster_env, "print the export line for a shell"),
    ):
        p = csub.add_parser(action, help=help_)
        p.add_argument("--name", default=None, help="local cluster name (default: $OPERATORLAB_CLUSTER_NAME or 'lab')")
        p.set_defaults(func=func)
        if action == "up":
            p.add_argument("--nodes", type=int, default=1, help="simulated nodes (default 1)")
            p.add_argument("--no-crds", action="store_true", help="do not apply crds/")
        if action == "down":
            p.add_argument("--purge", action="store_true", help="also delete certificates, etcd data and logs")

    lab_server = sub.add_parser("jupyter", help="JupyterLab on notebooks/: kernels and terminals on the cluster")
    lab_server.add_argument("--name", default=None,
                            help="local cluster name (default: $OPERATORLAB_CLUSTER_NAME or 'lab')")
    lab_server.add_argument("jupyter_args", nargs="*", help="passed on to `jupyter lab` (options too)")
    lab_server.set_defaults(func=jupyter)

    klass = sub.add_parser("class", help="a workshop's progress: which labs each learner passed")
    klass.add_argument("dir", nargs="?", help="the class directory (default: $OPERATORLAB_CLASS_DIR)")
    klass.set_defaults(func=class_view)

    op = sub.add_parser("operator", help="run the worked-example operators")
    osub = op.add_subparsers(dest="action", required=True)
    osub.add_parser("list", help="list the operators").set_defaults(func=operator_list)
    run = osub.add_parser("run", help="run an operator in the foreground")
    run.add_argument("name")
    run.add_argument("-n", "--namespace", action="append", help="watch only this namespace (repeatable)")
    run.add_argument("--cluster-name", default=None)
    run.add_argument("-v", "--verbose", action="store_true", help="kopf's debug log (every object handled)")
    run.set_defaults(func=operator_run)

    labs_cli.add_parsers(sub)  # operatorlab lab ..., operatorlab drill ...
    exercises_cli.add_parsers(sub)  # operatorlab exercise ...
    verify_cli.add_parsers(sub)  # operatorlab verify ...

    doc = sub.add_parser("doctor", help="check this machine and the cluster before a workshop (non-zero on a PROBLEM)")
    doc.add_argument("--name", default=None, help="local cluster name (default: $OPERATORLAB_CLUSTER_NAME or 'lab')")
    doc.set_defaults(func=doctor_run)

    w = sub.add_parser("why", help="why a kopf handler did not fire, or not finish, for one object")
    w.add_argument("target", metavar="KIND/NAME",
                   help="as kubectl names it: tenant/acme, tenants.hedronite.io/acme, tenants.v1.hedronite.io/acme")
    w.add_argument("-n", "--namespace", default=None, help="the object's namespace (default: the context's)")
    w.add_argument("--as", dest="as_user", default=None, metavar="USER",
                   help="check the verbs kopf needs for this identity, e.g. system:serviceaccount:NS:NAME")
    w.set_defaults(func=why_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command != "jupyter":  # only `jupyter` passes options on
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "jupyter":
        args.jupyter_args = [*args.jupyter_args, *unknown]
    try:
        return args.func(args)
    except (BinariesMissing, ClusterError, UnknownExercise, ValueError) as e:
        print(color(f"error: {e}", RED, stream=sys.stderr), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
