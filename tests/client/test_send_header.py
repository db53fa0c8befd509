from __future__ import annotations

import pytest

from mqcluster.broker.protocol import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    v1_to_v2,
)
from mqcluster.client.errors import ClientError
from mqcluster.client.send_header import send_header_v1, send_header_v2, send_response
from mqcluster.wire.frame import RemotingCommand


def test_client_headers_match_the_models() -> None:
    model = SendMessageRequestHeader(
        producerGroup="g", topic="T", defaultTopicQueueNums=4, queueId=2, bornTimestamp=9,
        flag=1, properties="p", batch=False,
    )  # fmt: skip
    assert send_header_v2("g", "T", 2, 9, 4, flag=1, properties="p") == v1_to_v2(
        model.to_ext()
    )
    model = model.model_copy(update={"batch": True, "flag": 0, "properties": ""})
    assert send_header_v1("g", "T", 2, 9, 4, batch=True) == model.to_ext()


@pytest.mark.parametrize("ext", [
    {"msgId": "AB,CD", "queueId": "3", "queueOffset": "17"},
    {"msgId": "AB", "queueId": "0", "queueOffset": "-1", "transactionId": "tx"},
])
def test_a_usual_send_answer_reads_as_the_model_validates_it(ext: dict[str, str]) -> None:
    resp = RemotingCommand(code=0, ext_fields=ext)
    assert send_response("a", resp) == SendMessageResponseHeader.from_ext(ext)


@pytest.mark.parametrize(("ext", "problem"), [
    ({"msgId": "AB", "queueId": "x", "queueOffset": "1"}, "queueId"),
    ({"msgId": "AB", "queueOffset": "1"}, "queueId"),
    ({"queueId": "1", "queueOffset": "1"}, "msgId"),
])
def test_a_bad_send_answer_names_the_field(ext: dict[str, str], problem: str) -> None:
    with pytest.raises(ClientError, match=problem):
        send_response("a", RemotingCommand(code=0, ext_fields=ext))
