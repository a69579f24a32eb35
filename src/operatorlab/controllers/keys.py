"""Work-queue keys for API objects: client-go ``tools/cache`` key functions.

A controller queues a *key*, not the object: ``"namespace/name"`` for a
namespaced object, ``"name"`` for a cluster-scoped one. The worker looks the
current object up by key when it reconciles (level-triggered), so a key
queued five times is reconciled once against the newest state.

The informer's ``DeletedFinalStateUnknown`` tombstone handling
(client-go ``DeletionHandlingMetaNamespaceKeyFunc``) belongs with the
informer, not here.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ExplicitKey", "meta_namespace_key", "split_meta_namespace_key"]


class ExplicitKey(str):
    """A key you already have; :func:`meta_namespace_key` returns it unchanged
    (client-go ``cache.ExplicitKey``)."""


def _field(obj: object, name: str) -> object:
    # Plain dicts / kopf bodies are Mappings; kubernetes client models
    # (V1ObjectMeta) and dynamic-client ResourceInstances use attributes.
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def meta_namespace_key(obj: object) -> str:
    """The work-queue key of an API object (client-go ``MetaNamespaceKeyFunc``,
    ``tools/cache/store.go``).

    Args:
        obj: a dict/Mapping with ``metadata.name`` (and ``metadata.namespace``
            if namespaced), a kubernetes client model such as ``V1Pod``, or an
            :class:`ExplicitKey`.

    Returns:
        ``"namespace/name"``, or ``"name"`` when the namespace is empty or
        absent (cluster-scoped objects).

    Raises:
        TypeError: ``obj`` has no ``metadata`` (client-go: "object has no meta").
        ValueError: ``metadata.name`` is empty or missing (client-go would
            return a broken key such as ``"ns/"``).
    """
    if isinstance(obj, ExplicitKey):
        return str(obj)
    metadata = _field(obj, "metadata")
    if metadata is None:
        raise TypeError(f"object has no meta: {type(obj).__name__} without metadata")
    name = _field(metadata, "name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"object has no metadata.name: {obj!r:.200}")
    namespace = _field(metadata, "namespace")
    return f"{namespace}/{name}" if namespace else name


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """Undo :func:`meta_namespace_key` (client-go ``SplitMetaNamespaceKey``).

    Returns:
        ``(namespace, name)``; namespace is ``""`` for a cluster-scoped key.

    Raises:
        ValueError: ``key`` has more than one ``/``.
    """
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")
