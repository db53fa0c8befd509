"""System message property names, as RocketMQ's MessageConst spells them: what a
producer sets and a consumer reads back in the properties string of every protocol."""

from __future__ import annotations

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY = "DELAY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_MSG_GROUP = "__SHARDINGKEY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
KEY_SEPARATOR = " "
"""Separates a message's keys in ``KEYS``."""
