"""ACL 2.0 (RocketMQ 5.3): users, policies, the evaluator and request signatures.

Pure: no sockets, files or clocks; the broker's front ends feed it what arrived.
"""
