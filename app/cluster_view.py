"""What ``GET /v1/cluster`` shows: the store's own view in a cluster, and on a single node
one node that owns every partition.

A single node's ``node_id`` is ``cluster.node_id`` when set, else ``"local"``; its URL is
``cluster.advertise_url`` when set, else ``http://<host>:<port>`` of its settings; every
partition's epoch is 0 (no owner ever changed).
"""

from __future__ import annotations

from app.config import Settings
from storage.protocol import ClusterMember, ClusterView, PartitionOwner, SupportsCluster

SINGLE_NODE_ID = "local"
CLUSTER_INGEST_REFUSED = (
    "the cluster does not ingest SST files yet: bulk loads into a cluster are a later "
    "issue (schedule through POST /v1/timers/batch, or ingest on a single node)"
)


def single_node_view(settings: Settings) -> ClusterView:
    cluster = settings.cluster
    node_id = cluster.node_id.strip() or SINGLE_NODE_ID
    url = cluster.advertise_url or f"http://{settings.host}:{settings.port}"
    owners = [PartitionOwner(p, node_id, 0) for p in range(cluster.partitions)]
    return ClusterView(node_id, cluster.partitions, owners, [ClusterMember(node_id, url, True)])


def cluster_view_of(store: object, settings: Settings) -> ClusterView:
    """The cluster store's view, or the single node's."""
    if isinstance(store, SupportsCluster):
        return store.cluster_view()
    return single_node_view(settings)


def is_caught_up(store: object) -> bool:
    """A cluster store once it has joined; a single node's store always."""
    return not isinstance(store, SupportsCluster) or store.caught_up()
