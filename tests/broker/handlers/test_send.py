"""The send handlers' answers: a stored message's frame is written without the general
encoder, and must read back exactly as the general encoder's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.handlers.send import _response
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.broker.messaging.send import SendOutcome
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.store.message import PutStatus
from mqcluster.wire.frame import RemotingCommand, decode_frame, encode_frame

HEX_IDS = st.lists(st.text("0123456789ABCDEF", min_size=32, max_size=32), min_size=1,
                   max_size=4)


@given(opaque=st.integers(0, 2**31 - 1), ids=HEX_IDS, queue=st.integers(0, 1023),
       offset=st.integers(0, 2**63 - 1),
)
def test_a_stored_messages_answer_is_the_frame_the_general_encoder_writes(
        opaque: int, ids: list[str], queue: int, offset: int) -> None:
    request = RemotingCommand(code=310, opaque=opaque, ext_fields={"b": "T"}, body=b"x")
    answer = _response(request, SendOutcome(None, PutStatus.PUT_OK, "", queue, offset, ids))
    assert isinstance(answer, bytes)
    general = request.response(BrokerResponseCode.SUCCESS, ext_fields={
        "msgId": ",".join(ids), "queueId": str(queue), "queueOffset": str(offset)})
    assert answer == encode_frame(general)
    assert decode_frame(answer) == general


def test_answers_with_a_remark_or_no_message_go_through_the_general_encoder() -> None:
    request = RemotingCommand(code=310, opaque=7)
    refused = _response(request, SendOutcome(Refusal(Reason.ILLEGAL_TOPIC, 'bad "x"')))
    assert isinstance(refused, RemotingCommand)
    assert (refused.code, refused.remark) == (BrokerResponseCode.MESSAGE_ILLEGAL, 'bad "x"')
    late = _response(request, SendOutcome(None, PutStatus.FLUSH_SLAVE_TIMEOUT, "", 1, 5,
                                          ["AB" * 16]))
    assert isinstance(late, RemotingCommand)
    assert late.code == BrokerResponseCode.FLUSH_SLAVE_TIMEOUT
    assert late.remark == "store answered FLUSH_SLAVE_TIMEOUT"
    assert late.ext_fields == {"msgId": "AB" * 16, "queueId": "1", "queueOffset": "5"}
