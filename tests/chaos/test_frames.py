"""The hostile-input generator of ``python -m chaos fuzz``: seeded, and drawn from the
project's own protocols."""

from __future__ import annotations

import random

from chaos.frames import FrameFuzzer
from mqcluster.raft.codes import RaftRequestCode
from mqcluster.wire.frame import FrameDecoder, FrameError


def test_the_same_seed_gives_the_same_payloads() -> None:
    a, b = FrameFuzzer(random.Random(7)), FrameFuzzer(random.Random(7))
    for _ in range(50):
        assert a.remoting() == b.remoting()
        assert a.ha() == b.ha()
        assert a.http() == b.http()


def test_codes_and_field_names_come_from_every_protocol() -> None:
    f = FrameFuzzer(random.Random(0))
    assert RaftRequestCode.HEARTBEAT_REQUEST in f.codes
    assert 1001 in f.codes  # a controller request (RIP-44)
    assert 310 in f.codes  # SEND_MESSAGE_V2
    for name in ("term", "leader_id", "topic", "queueId", "brokerName", "masterEpoch"):
        assert name in f.fields, name


def test_well_formed_frames_carry_out_of_range_values() -> None:
    """Many payloads are frames the decoder accepts, so they reach the handlers."""
    f = FrameFuzzer(random.Random(3))
    decoded = 0
    huge = 0
    for _ in range(300):
        try:
            commands = FrameDecoder().feed(f.remoting())
        except FrameError:
            continue
        for cmd in commands:
            decoded += 1
            huge += any(v.lstrip("-").isdigit() and abs(int(v)) >= 2**63
                        for v in cmd.ext_fields.values())
    assert decoded > 100
    assert huge > 10


def test_the_same_seed_gives_the_same_grpc_requests() -> None:
    """The gRPC requests the fuzz run fills in are drawn from its seed alone."""
    from google.protobuf import message_factory

    from chaos.fuzz import _fill, grpc_methods

    def requests(seed: int) -> list[bytes]:
        rng = random.Random(seed)
        out = []
        for _path, method in grpc_methods():
            msg = message_factory.GetMessageClass(method.input_type)()
            _fill(msg, rng)
            out.append(msg.SerializeToString(deterministic=True))
        return out

    for seed in range(5):
        assert requests(seed) == requests(seed)
