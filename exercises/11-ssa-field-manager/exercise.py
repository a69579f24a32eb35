"""Lesson 11: a server-side apply that owns one field and takes no field from another manager.

The learner's ``set_size(core, namespace, name, size)`` sets ``data.size`` of a ConfigMap by
server-side apply, as the field manager ``sizer``. The check's own manager applies the rest of
each ConfigMap first (fresh names and values each time). Graded from what the API server
records: the value, and ``metadata.managedFields``, which says who owns which field.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from types import ModuleType

from kubernetes import client

from operatorlab.exercises import Exercise
from operatorlab.grading import Check

NAMESPACE = "default"
MANAGER = "sizer"
OTHER = "ex11-team"  # the check's manager
APPLY_PATCH = "application/apply-patch+yaml"


class SsaFieldManager(Exercise):
    lesson = "11"
    title = "set_size: server-side apply of one field, as its own manager, without force"
    subject = "set_size"
    budget = 10.0
    hints = (
        "Who owns data.size once your write is done, and who owns the ConfigMap's other fields? The API "
        "server records it in metadata.managedFields.",
        "A server-side apply is a PATCH with the content type application/apply-patch+yaml and a field_manager. "
        "Send only the fields you mean to own; never force: a 409 from an apply means another manager owns "
        "the field, and that is an answer to report (return False), not one to override.",
        "Shape: core.patch_namespaced_config_map(name, namespace, {apiVersion, kind, metadata {name, namespace}, "
        "data {size: str(size)}}, field_manager='sizer', _content_type='application/apply-patch+yaml'); "
        "return True; on an ApiException with status 409 return False; raise any other.",
    )

    def check(self, learner: ModuleType) -> Iterator[Check]:
        set_size = learner.set_size
        core = client.CoreV1Api(self.api)
        draw = random.Random()
        ours, theirs = f"ex11s-{uuid.uuid4().hex[:6]}", f"ex11s-{uuid.uuid4().hex[:6]}"
        colour = draw.choice(["blue", "green", "amber", "teal"]) + f"-{draw.randint(1, 99)}"
        try:
            self._apply_other(core, ours, {"colour": colour})
            size = draw.randint(2, 50)
            returned = set_size(core, NAMESPACE, ours, size)
            data, owners = self._read(core, ours)
            yield Check(f"data.size is {size} and set_size said so (True)",
                        data.get("size") == str(size) and returned is True,
                        f"data {data}; set_size returned {returned!r}")
            yield Check(f"data.size is owned by the manager {MANAGER!r}, by an Apply",
                        owners.get(("size", "Apply")) == {MANAGER},
                        f"owners of data fields (field, operation) -> managers: {_show(owners)}")
            yield Check(f"the other manager's field stays its own alone (colour {colour})",
                        data.get("colour") == colour and owners.get(("colour", "Apply")) == {OTHER}
                        and not any(k[0] == "colour" and MANAGER in v for k, v in owners.items()),
                        f"data {data}; owners {_show(owners)}")
            again = size + draw.randint(1, 9)
            returned = set_size(core, NAMESPACE, ours, again)
            data, _ = self._read(core, ours)
            yield Check(f"a new size ({again}) replaces the one this manager set", data.get("size") == str(again)
                        and returned is True, f"data {data}; set_size returned {returned!r}")

            held = str(draw.randint(60, 99))
            self._apply_other(core, theirs, {"size": held})
            returned = set_size(core, NAMESPACE, theirs, 3)
            data, owners = self._read(core, theirs)
            yield Check(f"a size another manager owns is left to it (stays {held}) and set_size says False",
                        data.get("size") == held and owners.get(("size", "Apply")) == {OTHER} and returned is False,
                        f"data {data}; owners {_show(owners)}; set_size returned {returned!r}")
        finally:
            for name in (ours, theirs):
                try:
                    core.delete_namespaced_config_map(name, NAMESPACE)
                except client.ApiException as e:
                    if e.status != 404:
                        raise

    @staticmethod
    def _apply_other(core: client.CoreV1Api, name: str, data: dict[str, str]) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE},
                "data": data}
        core.patch_namespaced_config_map(name, NAMESPACE, body, field_manager=OTHER, _content_type=APPLY_PATCH)

    @staticmethod
    def _read(core: client.CoreV1Api, name: str) -> tuple[dict[str, str], dict[tuple[str, str], set[str]]]:
        """The ConfigMap's data, and who owns each data field: (field, operation) -> managers."""
        config_map = core.read_namespaced_config_map(name, NAMESPACE)
        owners: dict[tuple[str, str], set[str]] = {}
        for entry in config_map.metadata.managed_fields or []:
            for field in ((entry.fields_v1 or {}).get("f:data") or {}):
                owners.setdefault((field.removeprefix("f:"), entry.operation), set()).add(entry.manager)
        return dict(config_map.data or {}), owners


def _show(owners: dict[tuple[str, str], set[str]]) -> str:
    return ", ".join(f"{f} ({op}): {sorted(m)}" for (f, op), m in sorted(owners.items())) or "none"
