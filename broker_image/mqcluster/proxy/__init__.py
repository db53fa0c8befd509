"""``mqproxy``: RocketMQ 5's Proxy in cluster mode for one broker group.

A stateless gRPC endpoint in front of a replicated group: it learns the group's
master from the controllers (controller mode) or the name servers (DLedger and
master-slave modes) and passes every client call on to it. A client connected to a
proxy is never connected to the master process itself, so a master that hangs
(SIGSTOP, a stalled disk, a frozen VM) cannot hold the client's connection: the
proxy ends the calls in flight as soon as another master is elected and the client's
retry goes to the new one.
"""
