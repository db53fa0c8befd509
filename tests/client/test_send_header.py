from __future__ import annotations

import msgspec

from mqcluster.broker.protocol import SendMessageRequestHeader, v1_to_v2
from mqcluster.client.send_header import send_header_v1, send_header_v2


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
