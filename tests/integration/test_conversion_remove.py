"""A CRD whose conversion webhook is gone, with objects stored in its other version, can still be removed.

Deleting a CRD deletes its objects first, each read in the storage version, so an object stored in
the other version goes through the conversion: with the webhook stopped (as when a notebook's kernel
dies mid-lesson) the CRD stays Terminating. ``conversion.remove`` sets the conversion to ``None`` first.
"""

from __future__ import annotations

import pytest

from operatorlab import conversion, crds, paths

pytestmark = [pytest.mark.cluster, pytest.mark.local_cluster]  # the webhook listens on this machine's 127.0.0.1


def test_a_crd_whose_webhook_is_gone_is_removed(api_client, unique, kubeconfig) -> None:
    group = f"rm{unique}.hedronite.io"
    crd = conversion.two_versions(group)
    crds.install(api_client, crd)
    webhook = conversion.ConversionWebhook(paths.repo_root() / "src" / "operatorlab" / "nsb_conversion.py", crd,
                                           kubeconfig=kubeconfig)
    try:
        webhook.start()
        assert webhook.install(api_client), "the conversion webhook never answered"
        for i in range(3):
            conversion.create(api_client, crd, conversion.OLD, f"old-{i}", {"namespaceLabel": "team=a"})
        crds.install(api_client, conversion.with_webhook(conversion.two_versions(group, storage=conversion.NEW),
                                                         webhook.convert_url, webhook.ca_bundle))
        webhook.stop()

        with pytest.raises(TimeoutError, match="still there"):
            crds.remove(api_client, crd, timeout=5)  # Terminating: its objects cannot be read to be deleted
        conversion.remove(api_client, crd, wait=True)
    finally:
        webhook.stop()
        conversion.remove(api_client, crd, wait=False)
