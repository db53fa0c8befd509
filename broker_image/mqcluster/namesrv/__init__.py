"""Name server: stateless routing for brokers and clients (RocketMQ's NameServer)."""
