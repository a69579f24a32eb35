"""Lesson 11: a read-modify-write that loses no other writer's update, graded through the fault proxy.

The learner's ``increment(core, namespace, name, key)`` adds one to a counter kept in a
ConfigMap of the check's own (a fresh name each time). The check talks to it through the fault
proxy, which holds the learner's first write for a moment; while it is held, the check writes
the counter itself, so the learner's write carries a stale read. Then several of the learner's
increments race the check's own, and the final count must be exact. A ConfigMap that does not
exist must end the function with the API's error, not a loop.
"""

from __future__ import annotations

import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from kubernetes import client

from operatorlab import consistency
from operatorlab.exercises import Exercise
from operatorlab.exercises.watching import without_retries
from operatorlab.faults.proxy import FaultProxy
from operatorlab.grading import Check, converges

NAMESPACE = "default"
KEY = "count"
HOLD = 1.0  # seconds the proxy holds the learner's first write
THREADS, EACH = 2, 4  # the race: this many of the learner's threads and of the check's, each incrementing EACH times


class RetryOnConflict(Exercise):
    lesson = "11"
    title = "increment: read, change, write with the resourceVersion read, and retry on 409 Conflict"
    subject = "increment"
    budget = 30.0
    hints = (
        "Between your read and your write someone else may write. How does the API server tell you, and "
        "what must you do then?",
        "A replace carries the resourceVersion you read: if the object changed since, the server refuses it "
        "with 409 Conflict and stores nothing. Then read again, add one to what is there now, and write again. "
        "Only a 409 is worth a retry; a 404 is not.",
        "Shape: loop a bounded number of times: read the ConfigMap; data[key] = str(int(data.get(key, '0')) + 1); "
        "try core.replace_namespaced_config_map(name, namespace, cm) and return; except an ApiException with "
        "status 409: go round again; any other status: raise.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        increment = learner.increment
        name = f"ex11c-{uuid.uuid4().hex[:6]}"
        direct = client.CoreV1Api(self.api)
        proxy = FaultProxy(self.kubeconfig_path, Path(tempfile.mkdtemp(prefix="ex11c-")), name="ex11c").start()
        through = client.CoreV1Api(without_retries(proxy.kubeconfig))
        direct.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": name}, "data": {KEY: "0"}})

        def count() -> int:
            return int((direct.read_namespaced_config_map(name, NAMESPACE).data or {}).get(KEY, "0"))

        try:
            increment(through, NAMESPACE, name, KEY)
            yield Check("one increment adds one", count() == 1, f"count {count()} after one increment from 0")

            # The learner's next write waits in the proxy; the check's own increment lands first.
            put = f"/configmaps/{name}$"
            proxy.set_rules([{"action": "stall", "method": "PUT,PATCH", "path": put, "after": HOLD, "times": 1}])
            errors: list[BaseException] = []
            thread = threading.Thread(target=_run, args=(increment, through, name, errors), daemon=True)
            thread.start()
            held = converges(lambda: any(r["rule"] for r in proxy.stats()["requests"]), budget=10,
                             give_up=lambda: not thread.is_alive())
            if held.ok:
                consistency.add_one(direct, NAMESPACE, name, KEY)
            thread.join(HOLD + 15)
            if errors:
                raise errors[0]
            writes = [r["status"] for r in proxy.stats()["requests"]
                      if r["method"] in ("PUT", "PATCH") and r["path"].endswith(f"/{name}")]
            yield Check("a write made on a stale read does not overwrite the write that came first",
                        held.ok and count() == 3,
                        f"count {count()}, expected 3 (yours, the check's while yours waited, yours); your writes "
                        f"answered {writes}" + ("" if held.ok else "; your function wrote nothing in 10 s"))
            proxy.clear()

            errors.clear()
            threads = [threading.Thread(target=_run, args=(increment, through, name, errors, EACH), daemon=True)
                       for _ in range(THREADS)]
            threads += [threading.Thread(target=_run, args=(consistency.add_one, direct, name, errors, EACH),
                                         daemon=True) for _ in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(self.budget)
            if errors:
                raise errors[0]
            want = 3 + 2 * THREADS * EACH
            yield Check(f"{THREADS} threads of yours and {THREADS} of the check's, {EACH} increments each: none lost",
                        count() == want, f"count {count()}, expected {want}")

            missing = f"ex11c-missing-{uuid.uuid4().hex[:6]}"
            errors.clear()
            thread = threading.Thread(target=_run, args=(increment, through, missing, errors), daemon=True)
            thread.start()
            thread.join(10)
            status = getattr(errors[0], "status", None) if errors else None
            asked = sum(1 for r in proxy.stats()["requests"] if r["path"].endswith(f"/{missing}"))
            yield Check("a ConfigMap that does not exist: one request, then the API's 404 (a retry cannot help)",
                        not thread.is_alive() and status == 404 and asked == 1,
                        "still running after 10 s" if thread.is_alive()
                        else f"{asked} request(s) for it, then " + (f"raised {errors[0]!r}" if errors
                                                                    else "returned without an error"))
        finally:
            proxy.stop()
            through.api_client.close()
            try:
                direct.delete_namespaced_config_map(name, NAMESPACE)
            except client.ApiException as e:
                if e.status != 404:
                    raise


def _run(increment, core: client.CoreV1Api, name: str, errors: list[BaseException], times: int = 1) -> None:
    try:
        for _ in range(times):
            increment(core, NAMESPACE, name, KEY)
    except BaseException as e:  # noqa: BLE001 - the evidence the check shows
        errors.append(e)
