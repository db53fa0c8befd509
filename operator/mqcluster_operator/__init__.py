"""Kubernetes operator for mqcluster: CRDs, manifest builders, kopf handlers."""
