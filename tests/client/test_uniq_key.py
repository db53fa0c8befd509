from __future__ import annotations

import random

from mqcluster.client.uniq_key import UniqKeyGenerator


def test_keys_are_32_upper_hex_digits_and_unique() -> None:
    gen = UniqKeyGenerator(rng=random.Random(1))
    keys = gen.next_keys(70_000) + [gen.next_key() for _ in range(10)]
    assert all(len(k) == 32 and k == k.upper() and int(k, 16) >= 0 for k in keys)
    assert len(set(keys[:65_536])) == 65_536


def test_counter_wraps_but_time_separates() -> None:
    now = [1000.0]
    gen = UniqKeyGenerator(rng=random.Random(2), clock=lambda: now[0])
    first = gen.next_keys(65_536)
    now[0] += 0.001
    again = gen.next_keys(65_536)
    assert not set(first) & set(again)


def test_generators_have_different_prefixes() -> None:
    a = UniqKeyGenerator(rng=random.Random(3), pid=7).next_key()
    b = UniqKeyGenerator(rng=random.Random(4), pid=7).next_key()
    assert a[:20] != b[:20]


def test_one_key_at_a_time_continues_the_same_sequence() -> None:
    def gen() -> UniqKeyGenerator:
        return UniqKeyGenerator(rng=random.Random(5), pid=9, clock=lambda: 1000.0)

    one_by_one, listed = gen(), gen()
    keys = [one_by_one.next_key(), *one_by_one.next_keys(2), one_by_one.next_key()]
    assert keys == listed.next_keys(4)
