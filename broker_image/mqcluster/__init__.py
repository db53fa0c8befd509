"""mqcluster: a RocketMQ-5-style replicated message broker cluster."""

__version__ = "0.1.0"
