"""The ``cluster`` settings section (``TIMERSTORE_CLUSTER__<FIELD>``).

Empty ``nats_urls`` means a single node: the service runs exactly as it does without the
cluster. Every default of the section lives here.
"""

from __future__ import annotations

import msgspec

from storage.errors import ConfigError

DEFAULT_PARTITIONS = 16
DEFAULT_REPLICAS = 3
DEFAULT_LEASE_MS = 5_000  # a lost owner's partitions are taken over within about this long


class ClusterSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where the NATS servers are, who this node is, and how the timer space is cut."""

    nats_urls: tuple[str, ...] = ()  # nats://host:port, comma-separated in the environment
    node_id: str = ""  # unique in the cluster; required when nats_urls is set
    advertise_url: str = ""  # this node's base URL (http://host:port), shown in /v1/cluster
    partitions: int = DEFAULT_PARTITIONS  # fixed for the life of a cluster
    replicas: int = DEFAULT_REPLICAS  # JetStream replicas of every stream and bucket
    lease_ms: int = DEFAULT_LEASE_MS
    # every delivered message copied into the stream TIMERSTORE_LOG, for NATS clients that
    # read a topic natively; off, a burst is delivered several times faster (the copy is
    # one JetStream publish a message; docs/cluster.md), and the REST log is the same
    log_mirror: bool = True

    @property
    def enabled(self) -> bool:
        return bool(self.nats_urls)

    def __post_init__(self) -> None:
        for url in self.nats_urls:
            if not url.startswith(("nats://", "tls://")):
                raise ConfigError(
                    f"cluster.nats_urls: {url!r} is not a nats:// URL", field="cluster.nats_urls"
                )
        if self.nats_urls and not self.node_id.strip():
            raise ConfigError(
                "cluster.node_id must be set when cluster.nats_urls is (unique per node)",
                field="cluster.node_id",
            )
        if self.replicas not in (1, 3, 5):
            raise ConfigError("cluster.replicas must be 1, 3 or 5", field="cluster.replicas")
        if self.lease_ms < 1_000:
            raise ConfigError("cluster.lease_ms must be at least 1000", field="cluster.lease_ms")
