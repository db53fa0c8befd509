"""Raft groups of real ``mqraft`` processes."""
