"""An API fault proxy: between an operator and the real apiserver, it fails chosen requests on purpose.

::

    operator ──HTTP (loopback)──► FaultProxy ──HTTPS + admin credentials──► kube-apiserver
                                     │ rules: answer 429/500/503 (+ Retry-After),
                                     │        cut a watch stream (or any response), answer a watch with 410 Gone,
                                     │        stall a request (hold it unanswered for a while, then forward it),
                                     │        SIGKILL the operator once the apiserver acknowledged a write
                                     └ /_operatorlab/rules, /_operatorlab/stats: scripting

Everything not matched by a rule is forwarded unchanged and streamed back chunk by chunk
(watches included), so the operator talks to the real apiserver, with its real
resourceVersions, 409s and watch semantics; only the chosen requests fail.

The ``kill`` rule is the crash test of a reconcile: the apiserver has stored the write
(say, ``POST .../namespaces`` answered ``201 Created``), and the operator dies before it
reads that answer, exactly as a process OOM-killed mid-reconcile would. Because the fault
comes from outside, it works on any operator the proxy sits in front of (a learner's
included) and at any write, and the operator's code carries no hook for it.

Why plain HTTP on loopback towards the operator (not TLS with a certificate signed by
the cluster's CA): it works on every cluster. On an existing cluster (minikube, kind)
we do not hold the CA's private key and could not sign a serving certificate; the
proxy still reaches that apiserver with the kubeconfig's own credentials. It listens on
127.0.0.1 only, lives as long as the lab, and writes a kubeconfig pointing at itself
(``server: http://127.0.0.1:<port>``, no credentials: the proxy adds the admin's).

Rules (JSON objects, first match wins, each may fire a limited number of ``times``)::

    {"action": "status", "status": 429, "retry_after": 2, "method": "POST", "path": "/resourcequotas"}
    {"action": "gone", "path": "/tenants", "watch": true}          # a 410 ERROR event, then end
    {"action": "cut", "path": "/tenants", "watch": true, "after": 1}  # forward 1 s, then drop the connection
    {"action": "stall", "method": "GET", "path": "/networkpolicies/", "after": 60}  # silent for 60 s, then forward
    {"action": "cut", "method": "GET", "path": "/tenants$", "watch": false}  # a LIST's answer cut off at once
    {"action": "kill", "method": "POST", "path": "/namespaces$", "response": 201,
     "pid": 4242, "started": "81234", "times": 1}   # SIGKILL process 4242 (if still that one), once

Run: ``python -m operatorlab.faults.proxy --kubeconfig K --port P --write-kubeconfig OUT``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import ssl
import sys
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from operatorlab.cluster import kubeconfig as kubeconfig_file
from operatorlab.cluster import process

CONTROL = "/_operatorlab"
REASONS = {410: "Expired", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}
ACTIONS = ("status", "gone", "cut", "kill", "stall")
_DROP_REQUEST = {"host", "content-length", "accept-encoding", "connection", "transfer-encoding", "authorization",
                 "keep-alive"}
_DROP_RESPONSE = {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive"}


# -- rules (pure: unit-tested without a network) ------------------------------------------


@dataclass
class Rule:
    """When a request matches (``method``, ``path`` regex, ``watch``), do ``action``.

    Args:
        action: ``status`` (answer ``status`` with a Kubernetes Status body and, if set,
            ``Retry-After``: one number, or a list whose values the answers take in turn),
            ``gone`` (answer a watch with one ``ERROR`` event carrying a 410 Status, then end
            the stream, as kube-apiserver does for a too old resourceVersion), ``cut``
            (forward, then drop the connection after ``after`` s: a watch mid-stream, or
            with ``after`` 0 any response right after its headers, as a broken network does),
            ``stall`` (hold the request unanswered for ``after`` s, then forward it: a slow
            server, or with a long ``after`` a hung one, which a client without a timeout
            waits on for as long),
            ``kill`` (forward; when the apiserver answers ``response``, SIGKILL the process
            ``pid`` started at ``started`` before relaying the answer).
        method: an HTTP method, several comma-separated, or ``*``.
        path: a regular expression searched in the request path (``""`` matches all).
        watch: only watch requests (True), only non-watch (False), or both (None).
        times: how many requests it may answer (None: all; for ``kill``: how many kills).
        name: a label for the stats (default: derived from the rule).
        response: ``kill`` only: the apiserver's status code that fires it (None: any 2xx,
            i.e. the write was acknowledged).
        pid, started: ``kill`` only: the process to kill, by its identity
            (:class:`~operatorlab.cluster.process.Identity`), so a recycled pid is never hit.
    """

    action: str
    method: str = "*"
    path: str = ""
    watch: bool | None = None
    status: int = 503
    retry_after: float | list[float] | None = None
    after: float = 0.0
    times: int | None = None
    name: str = ""
    response: int | None = None
    pid: int | None = None
    started: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}; choose one of {', '.join(ACTIONS)}")
        if self.action == "status" and not 400 <= self.status <= 599:
            raise ValueError(f"status {self.status} is not an error status (400-599)")
        if self.action == "kill" and not (self.pid and self.started):
            raise ValueError("a kill rule needs the process's pid and started (its start time): "
                             "see operatorlab.cluster.process.Identity")
        re.compile(self.path)
        if not self.name:
            what = {"status": str(self.status), "gone": "410-event", "cut": f"cut-{self.after:g}s",
                    "stall": f"stall-{self.after:g}s",
                    "kill": f"kill-{self.pid}-on-{self.response or '2xx'}"}[self.action]
            self.name = f"{what} {self.method} {self.path or '*'}{' watch' if self.watch else ''}"

    @property
    def target(self) -> process.Identity:
        """The process a ``kill`` rule kills."""
        assert self.pid and self.started, self
        return process.Identity(self.pid, self.started)

    def matches(self, method: str, path: str, query: dict[str, str]) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.method != "*" and method.upper() not in {m.strip().upper() for m in self.method.split(",")}:
            return False
        if self.watch is not None and is_watch(query) != self.watch:
            return False
        if self.action == "gone" and not is_watch(query):
            return False
        return re.search(self.path, path) is not None

    def retry_after_of(self, answer: int) -> float | None:
        """The ``Retry-After`` of this rule's answer number ``answer`` (from 0): a list is taken in turn."""
        if isinstance(self.retry_after, list):
            return float(self.retry_after[answer % len(self.retry_after)]) if self.retry_after else None
        return self.retry_after

    def acknowledged(self, status: int) -> bool:
        """Whether the apiserver's answer ``status`` fires this ``kill`` rule."""
        return status == self.response if self.response is not None else 200 <= status <= 299


def is_watch(query: dict[str, str]) -> bool:
    return str(query.get("watch", "")).lower() in ("true", "1")


class RuleSet:
    """Ordered rules plus what they did.

    ``decide`` picks the first request rule (status, gone, cut) matching a request and
    counts it; ``on_response`` picks the first ``kill`` rule matching a request and the
    apiserver's answer to it, and counts it. A kill rule is used up by kills, not by
    requests whose answer did not fire it.
    """

    def __init__(self, rules: list[Rule] | None = None) -> None:
        self.rules: list[Rule] = list(rules or [])
        self.hits: dict[str, list[float]] = {}
        self.requests: deque[dict[str, Any]] = deque(maxlen=2000)

    def replace(self, rules: list[dict | Rule]) -> None:
        self.rules = [r if isinstance(r, Rule) else Rule(**r) for r in rules]

    def decide(self, method: str, path: str, query: dict[str, str]) -> Rule | None:
        return self.admit(method, path, query)[0]

    def admit(self, method: str, path: str, query: dict[str, str]) -> tuple[Rule | None, dict[str, Any]]:
        """:meth:`decide`, plus the record of the request kept for the stats.

        The record's ``status`` is the answer the client got: the rule's error status, or
        the apiserver's, which the caller fills in once it has it (None until then).
        """
        rule = next((r for r in self.rules if r.action != "kill" and r.matches(method, path, query)), None)
        if rule is not None:
            self._count(rule)
        record = {"t": time.time(), "method": method, "path": path, "watch": is_watch(query), "query": dict(query),
                  "rule": rule.name if rule else None,
                  "status": rule.status if rule is not None and rule.action == "status" else None}
        self.requests.append(record)
        return rule, record

    def on_response(self, method: str, path: str, query: dict[str, str], status: int) -> Rule | None:
        rule = next((r for r in self.rules if r.action == "kill" and r.matches(method, path, query)
                     and r.acknowledged(status)), None)
        if rule is not None:
            self._count(rule)
        return rule

    def _count(self, rule: Rule) -> None:
        if rule.times is not None:
            rule.times -= 1
        self.hits.setdefault(rule.name, []).append(time.time())

    def stats(self) -> dict[str, Any]:
        return {"rules": [asdict(r) for r in self.rules], "hits": self.hits, "requests": list(self.requests)}


def status_body(code: int, message: str | None = None) -> dict[str, Any]:
    """A Kubernetes ``Status`` object, as the apiserver sends with an error."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message or f"injected by the Operator Lab fault proxy ({code})",
            "reason": REASONS.get(code, "Unknown"), "code": code}


def gone_event() -> bytes:
    """The watch event kube-apiserver sends when a watch's resourceVersion is too old."""
    status = status_body(410, "too old resource version (injected by the Operator Lab fault proxy)")
    return (json.dumps({"type": "ERROR", "object": status}) + "\n").encode()


# -- the server ---------------------------------------------------------------------------


@dataclass
class Upstream:
    """Where and how to reach the real apiserver (from a kubeconfig)."""

    server: str
    ssl_context: ssl.SSLContext | bool
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Upstream:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=cfg)
        if not cfg.verify_ssl:
            context: ssl.SSLContext | bool = False
        else:
            context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.cert_file:
                context.load_cert_chain(cfg.cert_file, cfg.key_file)
        headers = {}
        token = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token if " " in token else f"Bearer {token}"
        return cls(cfg.host.rstrip("/"), context, headers)


def make_app(upstream: Upstream, rules: RuleSet):
    """The aiohttp application: control endpoints, rules, and the forwarding."""
    import aiohttp
    from aiohttp import web

    async def on_startup(app) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None, sock_connect=10)
        app["session"] = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        app["streams"] = {}  # requests being forwarded right now (watches stay here for minutes)

    async def on_cleanup(app) -> None:
        await app["session"].close()

    async def control(request: web.Request) -> web.StreamResponse:
        what = request.path[len(CONTROL):].strip("/")
        if what == "rules" and request.method == "PUT":
            try:
                rules.replace(await request.json())
            except (TypeError, ValueError) as e:
                return web.json_response({"error": str(e)}, status=400)
            # Open watches a new gone/cut rule matches are dropped now, so the client's next
            # watch request meets the rule (a watch may otherwise stay open for many minutes).
            for stream in list(request.app["streams"].values()):
                if any(r.action in ("gone", "cut") and r.matches(stream.method, stream.path, dict(stream.query))
                       for r in rules.rules) and stream.transport is not None:
                    stream.transport.abort()
        if what in ("rules", "stats"):
            return web.json_response(rules.stats())
        return web.json_response({"error": f"unknown control path {request.path}"}, status=404)

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path.startswith(CONTROL):
            return await control(request)
        rule, record = rules.admit(request.method, request.path, dict(request.query))
        if rule is not None and rule.action == "status":
            retry_after = rule.retry_after_of(len(rules.hits[rule.name]) - 1)  # admit counted this answer
            headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
            return web.json_response(status_body(rule.status), status=rule.status, headers=headers)
        if rule is not None and rule.action == "stall":
            await asyncio.sleep(rule.after)
            return await forward(request, record, cut_after=None)
        if rule is not None and rule.action == "gone":
            record["status"] = 200  # the watch's HTTP answer; the 410 is in the one event it carries
            response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(gone_event())
            await response.write_eof()
            return response
        return await forward(request, record, cut_after=rule.after if rule is not None else None)

    async def forward(request: web.Request, record: dict[str, Any], cut_after: float | None) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        headers.update(upstream.headers)
        body = await request.read()
        session = request.app["session"]
        try:
            upstream_response = await session.request(
                request.method, upstream.server + request.path_qs, headers=headers, data=body or None,
                ssl=upstream.ssl_context, allow_redirects=False,
                # Forward the client's Content-Type or none: aiohttp's default (octet-stream) gets a 415.
                skip_auto_headers=("Content-Type",))
        except aiohttp.ClientError as e:
            record["status"] = 503
            return web.json_response(status_body(503, f"fault proxy: upstream unreachable: {e}"), status=503)
        request.app["streams"][id(request)] = request
        record["status"] = upstream_response.status
        async with upstream_response:
            kill = rules.on_response(request.method, request.path, dict(request.query), upstream_response.status)
            if kill is not None:
                # The apiserver has done the write; the client dies before it hears so.
                kill.target.kill()
            response = web.StreamResponse(status=upstream_response.status, headers={
                k: v for k, v in upstream_response.headers.items() if k.lower() not in _DROP_RESPONSE})
            try:
                await response.prepare(request)
                if cut_after is not None and cut_after <= 0:
                    raise TimeoutError  # cut right after the headers: not one byte of the body
                async with asyncio.timeout(cut_after):
                    async for chunk in upstream_response.content.iter_any():
                        await response.write(chunk)
                await response.write_eof()
            except TimeoutError:
                # Drop the connection mid-stream, with no end-of-stream marker, as a broken network does.
                if request.transport is not None:
                    request.transport.abort()
                return response
            except (aiohttp.ClientError, ConnectionResetError):
                return response
            finally:
                request.app["streams"].pop(id(request), None)
            return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def write_proxy_kubeconfig(path: Path, port: int) -> Path:
    """Write a kubeconfig pointing at the proxy: plain HTTP on loopback, no credentials
    (the proxy adds the admin's on its way to the real apiserver)."""
    return kubeconfig_file.write(path, server=f"http://127.0.0.1:{port}", cluster="fault-proxy",
                                 user="via-fault-proxy")


def main(argv: list[str] | None = None) -> int:
    from aiohttp import web

    parser = argparse.ArgumentParser(prog="python -m operatorlab.faults.proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, type=Path, help="how to reach the real apiserver")
    parser.add_argument("--port", required=True, type=int, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--write-kubeconfig", type=Path, help="write a kubeconfig pointing at the proxy here")
    parser.add_argument("--rules", default="[]", help="initial rules, a JSON list")
    args = parser.parse_args(argv)
    rules = RuleSet()
    rules.replace(json.loads(args.rules))
    if args.write_kubeconfig:
        write_proxy_kubeconfig(args.write_kubeconfig, args.port)
    print(f"fault proxy on http://127.0.0.1:{args.port} -> {args.kubeconfig}", flush=True)
    # A short shutdown: a stalled request or an open watch must not hold a stop for the default 60 s.
    web.run_app(make_app(Upstream.from_kubeconfig(args.kubeconfig), rules), host="127.0.0.1", port=args.port,
                print=None, access_log=None, shutdown_timeout=1.0)
    return 0


# -- driving it from a lab ------------------------------------------------------------------


class FaultProxy:
    """A fault proxy process in front of the cluster of ``kubeconfig``, driven over HTTP.

    Usable alone (a notebook, a test) or by a lab, which records the process through
    ``on_start`` and finds it again with ``identity`` and ``port``. The process is
    detached: it outlives the command that started it, until :meth:`stop`.

    Args:
        kubeconfig: the real cluster and the credentials the proxy forwards with.
        workdir: where its log and the kubeconfig pointing at it are written.
        name: file-name stem for those (``<name>.log``, ``<name>.kubeconfig``).
        identity, port: a proxy started earlier (by another command) to drive or stop.
        on_start: called with the proxy as soon as it is spawned (a lab records it for cleanup).
    """

    def __init__(self, kubeconfig: Path, workdir: Path, *, name: str = "proxy",
                 identity: process.Identity | None = None, port: int | None = None,
                 on_start: Callable[[FaultProxy], None] | None = None) -> None:
        self.upstream_kubeconfig = Path(kubeconfig)
        self.identity = identity
        self.port = port
        self.log_path = Path(workdir) / f"{name}.log"
        #: The kubeconfig that sends an operator through the proxy.
        self.kubeconfig = Path(workdir) / f"{name}.kubeconfig"
        self._on_start = on_start

    def start(self, rules: list[dict] | None = None, *, timeout: float = 20.0) -> FaultProxy:
        """Start it with ``rules`` and wait until it answers.

        Raises:
            RuntimeError: it exited or did not answer within ``timeout`` s (with its log tail).
        """
        self.stop()
        attempts = 3
        while not self._spawn_and_wait(rules or [], timeout=timeout):
            attempts -= 1
            # Only a port taken between choosing and binding it is worth another try.
            if not attempts or not process.lost_port_race(self.log_path):
                raise RuntimeError(f"fault proxy exited:\n{process.tail(self.log_path)}")
        return self

    def _spawn_and_wait(self, rules: list[dict], *, timeout: float) -> bool:
        """One attempt on a newly chosen port: True once it answers, False if it exited."""
        self.port = process.free_port()
        argv = [sys.executable, "-m", "operatorlab.faults.proxy",
                "--kubeconfig", str(self.upstream_kubeconfig), "--port", str(self.port),
                "--write-kubeconfig", str(self.kubeconfig), "--rules", json.dumps(rules)]
        self.identity = process.Identity.of(process.spawn(argv, self.log_path))
        if self._on_start:
            self._on_start(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.identity.alive:
                self.stop()  # reaps it
                return False
            try:
                self.stats()
                return True
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"fault proxy not answering after {timeout:.0f}s:\n{process.tail(self.log_path)}")

    def stop(self) -> None:
        if self.identity:
            self.identity.stop(timeout=5)

    def set_rules(self, rules: list[dict]) -> dict:
        """Replace the rules (validated by the proxy); returns its stats."""
        return self._call("rules", method="PUT", body=rules)

    def clear(self) -> dict:
        return self.set_rules([])

    def stats(self) -> dict:
        """``{"rules": [...], "hits": {rule name: [unix times]}, "requests": [...]}``.

        Each request: ``t`` (unix time), ``method``, ``path``, ``watch``, ``query`` (its
        parameters, e.g. ``sendInitialEvents``), ``rule`` (the name of
        the rule that matched, or None) and ``status`` (the answer's status code; None while
        the apiserver has not answered).
        """
        return self._call("stats")

    def _call(self, what: str, *, method: str = "GET", body: Any = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{CONTROL}/{what}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (loopback)
            return json.loads(response.read())


if __name__ == "__main__":
    sys.exit(main())
