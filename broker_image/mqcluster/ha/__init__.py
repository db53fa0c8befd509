"""Replication of the commitlog between the replicas of a broker group.

``protocol`` (the HA stream's binary frames), ``truncation`` (RIP-44's consistent
point), ``sync_state`` (SyncStateSet, confirmOffset, write acks) are pure; ``master``
and ``slave`` put them on sockets; ``replicated_store`` makes writes wait for acks.
"""
