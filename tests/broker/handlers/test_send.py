"""The send handlers' answers: a stored message's frame is written without the general
encoder, and must read back exactly as the general encoder's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.handlers.send import _response
from mqcluster.broker.protocol import BrokerResponseCode
from mqcluster.broker.send_service import SendOutcome
from mqcluster.wire.frame import RemotingCommand, decode_frame, encode_frame

HEX_IDS = st.lists(st.text("0123456789ABCDEF", min_size=32, max_size=32), min_size=1,
                   max_size=4)


@given(opaque=st.integers(0, 2**31 - 1), ids=HEX_IDS, queue=st.integers(0, 1023),
       offset=st.integers(0, 2**63 - 1),
       code=st.sampled_from([BrokerResponseCode.SUCCESS,
                             BrokerResponseCode.FLUSH_SLAVE_TIMEOUT]))
def test_a_stored_messages_answer_is_the_frame_the_general_encoder_writes(
        opaque: int, ids: list[str], queue: int, offset: int, code: int) -> None:
    request = RemotingCommand(code=310, opaque=opaque, ext_fields={"b": "T"}, body=b"x")
    answer = _response(request, SendOutcome(code, None, queue, [], offset, ids))
    assert isinstance(answer, bytes)
    general = request.response(code, ext_fields={
        "msgId": ",".join(ids), "queueId": str(queue), "queueOffset": str(offset)})
    assert answer == encode_frame(general)
    assert decode_frame(answer) == general


def test_answers_with_a_remark_or_no_message_go_through_the_general_encoder() -> None:
    request = RemotingCommand(code=310, opaque=7)
    refused = _response(request, SendOutcome(BrokerResponseCode.MESSAGE_ILLEGAL, 'bad "x"'))
    assert isinstance(refused, RemotingCommand)
    assert refused.remark == 'bad "x"'
    late = _response(request, SendOutcome(BrokerResponseCode.FLUSH_SLAVE_TIMEOUT,
                                          "store answered FLUSH_SLAVE_TIMEOUT", 1, [], 5,
                                          ["AB" * 16]))
    assert isinstance(late, RemotingCommand)
    assert late.ext_fields == {"msgId": "AB" * 16, "queueId": "1", "queueOffset": "5"}
