"""A local cluster from the same manifests and config builders the operator uses.

``plan`` turns Controller and BrokerGroup manifests into processes (what the
operator's ConfigMaps would hold, with the pods' DNS names replaced by local
127.x.y.z addresses and the data directories by local ones); ``runner`` starts,
inspects and stops them; ``cli`` is ``mqcluster local up|status|down``; ``demo`` is
what ``make demo`` runs.
"""
