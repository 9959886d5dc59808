"""The cluster: partitions of the timer space, each owned by one node at a time, with NATS
JetStream as the replicated source of truth. It sits between ``app`` and ``storage``
(``app -> cluster -> storage``); with no NATS URLs configured nothing here runs.
"""
