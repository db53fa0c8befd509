"""Raft groups of real ``mqraft`` processes, and their client."""
