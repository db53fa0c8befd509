"""The ranges of Java's ``int`` and ``long``.

RocketMQ and DLedger keep every number they send or store (queue ids, offsets, terms,
epochs, lengths) in one or the other, so a value outside them is one no RocketMQ
process could have written: decoders refuse it rather than carry it on.
"""

from __future__ import annotations

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
