"""The broker process: configuration, internal RPC handlers, metrics, lifecycle."""
