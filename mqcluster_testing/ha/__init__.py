"""Broker groups: of real processes (controller, DLedger, master-slave modes) and in-process."""
