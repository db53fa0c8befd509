"""``mqproxy``: RocketMQ 5's Proxy in cluster mode, stateless, for a whole cluster.

One gRPC endpoint for every broker group and topic: routes and assignments merged
across groups (routes.py), each call sent to the group it concerns (service.py), the
groups' masters learnt from the controllers' watch and the name servers
(discovery.py). A client connected to a proxy is never connected to a master process,
so a master that hangs (SIGSTOP, a stalled disk, a frozen VM) cannot hold the client:
a short deadline per call and the proxy's own probe (health.py) make that group's
calls fail fast, sends go to the groups that answer, and the group's calls go to its
new master as soon as the controllers elect one. Nothing a client needs is kept in a
proxy (tokens.py): any replica serves any client.
"""

# First: the official client's stubs without its package __init__ (see grpc_stubs.py), so
# the proxy's modules import them without the client's logging writing under HOME.
import mqcluster.protocol.grpc_stubs  # noqa: F401  # isort: skip
