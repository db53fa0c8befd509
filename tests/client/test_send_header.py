from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.client.send_header import send_header_v1, send_header_v2, send_v2_frame
from mqcluster.protocol.broker import RequestCode, SendMessageRequestHeader, v1_to_v2
from mqcluster.wire.frame import RemotingCommand, encode_frame


def test_client_headers_match_the_models() -> None:
    model = SendMessageRequestHeader(
        producerGroup="g", topic="T", defaultTopicQueueNums=4, queueId=2, bornTimestamp=9,
        flag=1, properties="p", batch=False,
    )  # fmt: skip
    assert send_header_v2("g", "T", 2, 9, 4, flag=1, properties="p") == v1_to_v2(
        model.to_ext()
    )
    model = msgspec.structs.replace(model, batch=True, flag=0, properties="")
    assert send_header_v1("g", "T", 2, 9, 4, batch=True) == model.to_ext()


# (joined from a list: ``st.text`` leaves out lone surrogates, which the template must
# hand to the general encoder)
_texts = st.lists(st.characters(codec="utf-8")
                  | st.sampled_from(["\x01", "\x02", '"', "\\", "\udc80"]),
                  max_size=40).map("".join)
_ints = st.integers(min_value=-(2**31), max_value=2**63 - 1)


@given(opaque=_ints, group=_texts, topic=_texts, queue_id=_ints, born=_ints,
       queue_nums=_ints, flag=_ints, properties=_texts, body=st.binary(max_size=64))
def test_the_v2_frame_template_writes_what_the_general_encoder_writes(
        opaque: int, group: str, topic: str, queue_id: int, born: int, queue_nums: int,
        flag: int, properties: str, body: bytes) -> None:
    fields = send_header_v2(group, topic, queue_id, born, queue_nums, flag=flag,
                            properties=properties)
    general = encode_frame(RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque,
                                           ext_fields=fields, body=body))
    assert send_v2_frame(opaque, group, topic, queue_id, born, queue_nums, flag,
                         properties, body) == general
