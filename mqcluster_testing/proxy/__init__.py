"""Clusters of several broker groups as processes, served by cluster-wide proxies."""
