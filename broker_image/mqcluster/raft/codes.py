"""Request and response codes of the Raft protocol, in the reserved range 2001-2099.

2001-2049: messages between group members (one-way, see ``codec``).
2050-2079: client requests served by a standalone ``mqraft`` member.
2080-2099: response codes.
"""

from __future__ import annotations

from enum import IntEnum


class RaftRequestCode(IntEnum):
    VOTE_REQUEST = 2001
    VOTE_RESPONSE = 2002
    HEARTBEAT_REQUEST = 2003
    HEARTBEAT_RESPONSE = 2004
    APPEND_REQUEST = 2005
    APPEND_RESPONSE = 2006
    INSTALL_SNAPSHOT_REQUEST = 2007
    INSTALL_SNAPSHOT_RESPONSE = 2008
    TIMEOUT_NOW_REQUEST = 2009

    CLIENT_PROPOSE = 2050  # body: packed values; answer: ext first/last index, JSON results
    CLIENT_STATUS = 2051  # answer: body JSON status
    CLIENT_READ = 2052  # ext from/limit; answer: body JSON of the state machine's values
    CLIENT_TRANSFER_LEADERSHIP = 2053  # ext target


class RaftResponseCode(IntEnum):
    NOT_LEADER = 2080  # ext leaderId, leaderAddr (absent when unknown)
    PROPOSAL_FAILED = 2081  # timed out or overwritten by another leader; remark says which
