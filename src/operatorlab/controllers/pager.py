"""LIST in pages (``limit`` + ``continue``): client-go's ``tools/pager``.

A LIST of a large collection is one large response the API server builds in
memory. With ``limit=N`` it returns at most N items and, when there are more,
``metadata.continue``: a token for the rest, at the *same* snapshot
(resourceVersion) as the first page. The pager asks for pages until the token
is empty and joins them.

A token is only good while etcd still holds that snapshot; after a
compaction (kube-apiserver compacts every 5 minutes by default) the next page
is answered ``410 Expired``. The pager then falls back to one unpaged LIST at
the resourceVersion first asked for (client-go ``ListPager.list`` with
``FullListIfExpired``, its default), so a slow consumer still gets a whole,
consistent list.

Read in k8s.io/client-go v0.36.3 ``tools/pager/pager.go``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from operatorlab.controllers.reflector_policy import RequestFailed

__all__ = ["DEFAULT_PAGE_SIZE", "ListPage", "Listed", "list_pages"]

#: client-go ``defaultPageSize``.
DEFAULT_PAGE_SIZE = 500


class ListPage(Protocol):
    """One LIST request: a page of the collection (raises :class:`RequestFailed`)."""

    def __call__(self, *, resource_version: str, limit: int, continue_token: str) -> Mapping[str, Any]: ...


@dataclass
class Listed:
    """A whole list, joined from its pages.

    Attributes:
        items: every object.
        resource_version: the snapshot's (the first page's ``metadata.resourceVersion``).
        pages: LIST requests made (the fallback included).
        paginated: the server returned more than one page (a continue token).
    """

    items: list[dict[str, Any]] = field(default_factory=list)
    resource_version: str = ""
    pages: int = 0
    paginated: bool = False


def list_pages(page: ListPage, *, resource_version: str, page_size: int) -> Listed:
    """LIST the whole collection in pages of ``page_size`` (0: one unpaged LIST).

    The first page asks for ``resource_version``; the following ones only
    carry the continue token (the server refuses both together). A 410
    ``Expired`` on a later page falls back to one unpaged LIST at
    ``resource_version``.

    Raises:
        RequestFailed: a page failed (other than an expired continue token).
    """
    listed = Listed()
    continue_token = ""
    while True:
        try:
            body = page(resource_version=resource_version if not continue_token else "", limit=page_size,
                        continue_token=continue_token)
        except RequestFailed as e:
            if e.failure.reason != "Expired" or not continue_token:  # only IsResourceExpired, only on page 2+
                raise
            # The snapshot is gone: one unpaged LIST at the resourceVersion first asked for.
            body = page(resource_version=resource_version, limit=0, continue_token="")
            return Listed(list(body.get("items") or []), _resource_version(body), listed.pages + 2, paginated=True)
        listed.pages += 1
        if not listed.resource_version:
            listed.resource_version = _resource_version(body)
        listed.items.extend(body.get("items") or [])
        continue_token = (body.get("metadata") or {}).get("continue") or ""
        if not continue_token:
            return listed
        listed.paginated = True


def _resource_version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")
