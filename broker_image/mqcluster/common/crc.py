"""CRC-32 of stored and replicated records: the zlib (IEEE) polynomial, the values
``zlib.crc32`` and Java's ``CRC32`` give.

Every message is checksummed several times on its way (batch body, commitlog record,
Raft record, and again where each is read back), so it is computed with ISA-L's
carry-less-multiply code when ``isal`` is installed (a dependency of the broker):
the same values as zlib's, faster (``python -m bench store`` prints both).
"""

from __future__ import annotations

try:
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - a platform without an isal wheel
    from zlib import crc32

__all__ = ["crc32"]
