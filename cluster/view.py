"""``GET /v1/cluster``'s answer from what the node last read of the leases and the nodes."""

from __future__ import annotations

from cluster.ownership import Ownership
from storage.protocol import ClusterMember, ClusterView, PartitionOwner


def cluster_view(ownership: Ownership, now_ms: int) -> ClusterView:
    owners = []
    for partition in range(ownership.settings.partitions):
        held = ownership.seen.get(partition)
        lease = held.lease if held is not None else None
        live = lease is not None and lease.expires_at_ms > now_ms
        owners.append(
            PartitionOwner(
                partition, lease.node_id if live and lease else None, lease.epoch if lease else 0
            )
        )
    alive = set(ownership.alive(now_ms))
    members = dict(ownership.members)
    nodes = [
        ClusterMember(
            node,
            members[node].url if node in members else ownership.settings.advertise_url,
            node in alive,
        )
        for node in sorted(set(members) | {ownership.node_id})
    ]
    return ClusterView(ownership.node_id, ownership.settings.partitions, owners, nodes)
