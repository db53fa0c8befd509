"""The records' CRC-32: zlib's values, from the fast implementation the broker depends on."""

from __future__ import annotations

import random
import zlib

from mqcluster.common import crc


def test_the_checksum_is_zlibs_crc32_for_every_length_and_seed() -> None:
    rng = random.Random(7)
    for size in [0, 1, 7, 64, 1023, 1024, 1100, 65_536 + 3]:
        data = rng.randbytes(size)
        seed = rng.getrandbits(32)
        assert crc.crc32(data) == zlib.crc32(data)
        assert crc.crc32(data, seed) == zlib.crc32(data, seed)
        view = memoryview(data)[size // 3:]
        assert crc.crc32(view) == zlib.crc32(view)


def test_the_checksum_comes_from_isal() -> None:
    # isal is a dependency of the broker: zlib's CRC is the fallback of other platforms.
    assert crc.crc32.__module__ == "isal.isal_zlib"
