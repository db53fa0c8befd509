"""pytest fixtures of the real control plane (``fixtures``); the control plane, its node
agent and mirror are test support: ``mqcluster_testing.operator.realplane``."""
