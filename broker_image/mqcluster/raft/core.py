"""RaftNode: the sans-I/O DLedger state machine (DLedgerLeaderElector's election and
heartbeats), Raft's replication (nextIndex/matchIndex, conflicts, commit), membership and
snapshots.

No sockets, clocks, files or threads: the caller passes time to ``tick(now)`` and
``step(msg, now)``, collects a ``Ready`` (what to persist, send and apply), does
that work in the order the Ready documents, then calls ``advance(ready)``.
Exactly one Ready may be outstanding; ``tick``/``step``/``propose`` may run while
it is being persisted, and their effects land in the next Ready.

The term only moves in the candidate's maintain step (DLedger's ``nextTerm``):
a node that sees a bigger term becomes a candidate with
``need_increase_term_immediately`` and adopts it on its next tick.

Where DLedger has no answer (it has no membership changes, no snapshots) or its
rules could stall a group, this core adds, each commented where it is done:
following a leader counts as a vote for it; a REJECT_UNKNOWN_LEADER answer is
not a valid vote; learners forget a silent leader; a leader whose push is
answered with a bigger term steps down (Raft's rule), so a lagging node stuck at
a bigger term (a preferred leader made a candidate by DLedger's LEADERSHIP_TRANSFER
before it caught up) cannot be left out for ever; a follower's rejection
carries a skip-back hint that jumps over a whole conflicting term.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mqcluster.raft.election import VoteOutcome, VoterState, VoteTally, answer_vote
from mqcluster.raft.heartbeat import (
    HeartbeatAnswerAction,
    HeartbeatTally,
    HeartbeatVerdict,
    answer_heartbeat,
)
from mqcluster.raft.limits import MAX_TERM
from mqcluster.raft.membership import (
    copy_membership,
    decode_membership,
    encode_membership,
    with_learner,
    with_promoted,
    without_member,
)
from mqcluster.raft.memory_log import LoadFn, MemoryLog
from mqcluster.raft.progress import Progress, ProgressState
from mqcluster.raft.quorum import quorum_index
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    AppendResponseCode,
    Entry,
    EntryType,
    HardState,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResponseCode,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    InstallSnapshotResponseCode,
    Membership,
    Message,
    NotLeaderError,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    StoredEntries,
    TimeoutNowRequest,
    TransferInProgressError,
    VoteParseResult,
    VoteRequest,
    VoteResponse,
    VoteResponseCode,
)

_NEVER = float("-inf")
_EPSILON = 1e-9


@dataclass(slots=True)
class _VoteRound:
    number: int
    tally: VoteTally
    deadline: float
    voters: frozenset[str]


@dataclass(slots=True)
class _HeartbeatRound:
    number: int
    tally: HeartbeatTally
    deadline: float
    voters: frozenset[str]


@dataclass(slots=True)
class _Transfer:
    target: str
    deadline: float
    timeout_now_sent_at: float | None = None


class RaftNode:
    def __init__(
        self,
        node_id: str,
        config: RaftConfig,
        membership: Membership,
        *,
        hard_state: HardState,
        snapshot: Snapshot | None,
        entries: list[Entry],
        rng: random.Random,
        now: float,
        load: LoadFn | None = None,
        max_cached_bytes: int | None = None,
        stored: StoredEntries | None = None,
    ) -> None:
        """Start (or restart) from durable state; ``membership`` is used only when
        neither the snapshot nor a CONFIG entry in ``entries`` says otherwise.
        The caller restores its state machine from ``snapshot`` itself. With
        ``load`` (storage's reader), the data of applied entries past
        ``max_cached_bytes`` is dropped from memory (see ``MemoryLog.release``), and
        the log may start as ``stored`` entries whose data it reads when needed."""
        self.id = node_id
        self.config = config
        self._rng = rng
        self._now = now
        self._term = hard_state.term
        self._voted_for = hard_state.voted_for
        self._hs_dirty = False

        self._snapshot = snapshot
        snap_index = snapshot.meta.index if snapshot else 0
        snap_term = snapshot.meta.term if snapshot else 0
        self._log = MemoryLog(snap_index, snap_term, entries, load=load,
                            max_cached_bytes=max_cached_bytes, stored=stored)
        self._base_membership = copy_membership(
            snapshot.meta.membership if snapshot else membership
        )
        self._config_indexes = self._log.indexes_of(EntryType.CONFIG)
        self._membership = self._base_membership
        self._voters: frozenset[str] = frozenset()
        self._role = Role.CANDIDATE  # DLedger: every node starts as a candidate
        self._refresh_membership()
        self._commit_index = snap_index
        self._applied_handed = snap_index

        self._leader_id: str | None = None
        # candidate
        self._next_time_to_request_vote = now
        self._need_increase_term_immediately = False
        # Term 0 means "no election yet": the first round already uses term 1. A member
        # that voted for itself may have led that term with entries it wrote but had not
        # fsync'd when it stopped: leading the same term again could give another entry
        # the same index and term, so it campaigns in a new term (where DLedger would revote).
        self._last_parse_result = (
            VoteParseResult.WAIT_TO_VOTE_NEXT
            if self._term == 0 or self._voted_for == node_id
            else VoteParseResult.WAIT_TO_REVOTE
        )
        self._known_max_term_in_group = self._term
        self._vote_round: _VoteRound | None = None
        # The last finished round and its outcome, for logs and traces.
        self.last_vote_round: tuple[VoteTally, VoteOutcome] | None = None
        self.rounds_finished = 0
        self._round_counter = 0
        self._take_leadership_term = -1
        # follower
        self._last_leader_heartbeat = now
        self._verified_index = 0  # highest index known to match the current leader's log
        # leader
        self._progress: dict[str, Progress] = {}
        self._last_send_heartbeat = _NEVER
        self._last_succ_heartbeat = now
        self._heartbeat_round: _HeartbeatRound | None = None
        self._append_seq = 0
        self._transfer: _Transfer | None = None
        self._next_preferred_check = now
        # output
        self._messages: list[Message] = []
        self._pending_snapshot: Snapshot | None = None
        self._compacted_to: int | None = None
        self._outstanding = False

    # ------------------------------------------------------------------ properties

    @property
    def role(self) -> Role:
        if self._role != Role.LEADER and self.id not in self._voters:
            return Role.LEARNER
        return self._role

    @property
    def term(self) -> int:
        return self._term

    @property
    def voted_for(self) -> str | None:
        return self._voted_for

    @property
    def leader_id(self) -> str | None:
        return self._leader_id

    @property
    def commit_index(self) -> int:
        return self._commit_index

    @property
    def last_index(self) -> int:
        return self._log.last_index

    @property
    def last_term(self) -> int:
        return self._log.last_term

    @property
    def snapshot_index(self) -> int:
        return self._log.snapshot_index

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (from ``compact``, an install, or the restart)."""
        return self._snapshot

    @property
    def membership(self) -> Membership:
        return copy_membership(self._membership)

    @property
    def transferee(self) -> str | None:
        return self._transfer.target if self._transfer else None

    @property
    def taking_leadership(self) -> bool:
        return self._take_leadership_term == self._term

    @property
    def last_parse_result(self) -> VoteParseResult:
        return self._last_parse_result

    @property
    def need_increase_term_immediately(self) -> bool:
        return self._need_increase_term_immediately

    @property
    def next_time_to_request_vote(self) -> float:
        return self._next_time_to_request_vote

    def match_index(self, peer: str) -> int:
        """Leader only: the follower's match index (the leader's own persisted index)."""
        if peer == self.id:
            return self._log.persisted
        progress = self._progress.get(peer)
        return progress.match_index if progress else 0

    def _committed_batch(self, lo: int) -> list[Entry]:
        """Committed entries from ``lo``, at most ``max_committed_bytes`` of data (at
        least one): a log read back from storage is applied a part at a time."""
        if lo > self._commit_index:
            return []
        return self._log.batch(lo, self._commit_index - lo + 1, self.config.max_committed_bytes)

    def committed_entries(self, lo: int) -> list[Entry]:
        """What ``ready`` would hand out as committed from ``lo``."""
        return self._committed_batch(lo)

    def release_applied(self, applied: int) -> None:
        """The caller applied everything up to ``applied``: what is also durable may
        leave memory (when a size limit was given)."""
        self._log.release(min(applied, self._log.persisted))

    @property
    def cached_log_bytes(self) -> int:
        return self._log.cached_bytes

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi still in memory (not compacted)."""
        return self._log.slice(lo, hi)

    # ------------------------------------------------------------------ driving

    def tick(self, now: float) -> None:
        self._now = now
        if self._role == Role.LEADER:
            self._maintain_as_leader()
        elif self._role == Role.FOLLOWER:
            self._maintain_as_follower()
        else:
            self._maintain_as_candidate()

    def leader_unreachable(self, leader: str, now: float) -> None:
        """The transport found ``leader``'s port closed (its process is gone): a
        follower of it becomes a candidate now instead of after
        ``max_heartbeat_leak`` heartbeats of silence. A leader still running
        refuses nothing, so this never unseats one."""
        self._now = now
        if self._role == Role.FOLLOWER and self._leader_id == leader:
            # Straight to a new term: in this one every voter voted for the dead leader
            # (following counts as a vote). The next tick moves to it and waits a
            # randomized interval first, as after a lost round: the other followers
            # see the same closed port at the same moment.
            self._change_role_to_candidate(self._term)
            self._need_increase_term_immediately = True

    def step(self, msg: Message, now: float) -> None:
        self._now = now
        if msg.dst != self.id or msg.term > MAX_TERM:
            return  # (the codec refuses such terms; a caller of the core may not)
        if isinstance(msg, VoteRequest):
            self._handle_vote_request(msg)
        elif isinstance(msg, VoteResponse):
            self._handle_vote_response(msg)
        elif isinstance(msg, HeartbeatRequest):
            self._handle_heartbeat(msg)
        elif isinstance(msg, HeartbeatResponse):
            self._handle_heartbeat_response(msg)
        elif isinstance(msg, AppendRequest):
            self._handle_append(msg)
        elif isinstance(msg, AppendResponse):
            self._handle_append_response(msg)
        elif isinstance(msg, InstallSnapshotRequest):
            self._handle_install_snapshot(msg)
        elif isinstance(msg, InstallSnapshotResponse):
            self._handle_install_snapshot_response(msg)
        else:
            self._handle_timeout_now(msg)

    def propose(self, data: bytes) -> int:
        return self.propose_batch([data])[0]

    def propose_batch(self, items: list[bytes]) -> list[int]:
        self._require_writable_leader()
        first = self._log.last_index + 1
        term, normal = self._term, EntryType.NORMAL
        # NORMAL entries never change the membership: append them as one run.
        self._log.extend([Entry(first + i, term, normal, data) for i, data in enumerate(items)])
        self._broadcast_append()
        return list(range(first, first + len(items)))

    def add_learner(self, node: str) -> int:
        return self._change_membership(with_learner(self._config_base(), node))

    def promote_learner(self, node: str) -> int:
        membership = with_promoted(self._config_base(), node)
        if self._log.last_index - self.match_index(node) > self.config.learner_catch_up_gap:
            raise ValueError(f"learner {node} has not caught up yet")
        return self._change_membership(membership)

    def remove_member(self, node: str) -> int:
        if node == self.id:
            raise ValueError("the leader cannot remove itself: transfer leadership first")
        return self._change_membership(without_member(self._config_base(), node))

    def transfer_leadership(self, target: str, now: float) -> None:
        """Hand leadership to ``target`` once it has caught up (DLedger's leadership transfer,
        with the transferee catching up first so it cannot be stuck a candidate).

        Writes are refused meanwhile; after ``transfer_timeout`` without success
        the leader resumes normal service."""
        self._now = now
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader_id)
        if target == self.id:
            return
        if target not in self._voters:
            raise ValueError(f"{target} is not a voter")
        if self._transfer is not None:
            raise TransferInProgressError(self._transfer.target)
        self._transfer = _Transfer(target, now + self.config.transfer_timeout)
        self._check_transfer()

    def compact(self, index: int, snapshot_data: bytes) -> None:
        """The state machine has durably stored a snapshot up to ``index`` (applied)."""
        if index <= self._log.snapshot_index:
            return
        if index > self._applied_handed:
            raise ValueError(f"cannot compact to {index}: applied only to {self._applied_handed}")
        term = self._log.term_at(index)
        assert term is not None
        meta = SnapshotMeta(index=index, term=term, membership=self._membership_at(index))
        self._log.compact(index)
        self._snapshot = Snapshot(meta=meta, data=snapshot_data)
        self._base_membership = copy_membership(meta.membership)
        self._config_indexes = [i for i in self._config_indexes if i > index]
        self._compacted_to = index

    def take_leader_pushes(self) -> list[Message]:
        """Leader only: the AppendRequests and heartbeats queued since the last Ready.

        The caller may send these while that Ready is still being persisted, if it
        carries no hard state: they hold only the current term, durable since the
        election, and entries a leader may replicate before its own fsync (Raft
        thesis 10.2.1; the leader counts itself only after ``advance``). Every
        other message stays queued for the next Ready."""
        if self._role != Role.LEADER or self._hs_dirty or not self._messages:
            return []
        pushes: list[Message] = []
        rest: list[Message] = []
        for m in self._messages:
            (pushes if isinstance(m, (AppendRequest, HeartbeatRequest)) else rest).append(m)
        self._messages = rest
        return pushes

    def has_ready(self) -> bool:
        if self._outstanding:
            return False
        return (
            self._hs_dirty
            or bool(self._messages)
            or self._log.pending_truncate is not None
            or self._log.last_index > self._log.handed
            or self._pending_snapshot is not None
            or self._commit_index > self._applied_handed
            or self._compacted_to is not None
        )

    def ready(self) -> Ready:
        if self._outstanding:
            raise RuntimeError("advance() the previous Ready first")
        rd = Ready(
            hard_state=HardState(self._term, self._voted_for) if self._hs_dirty else None,
            truncate_from=self._log.pending_truncate,
            entries=self._log.unstable(),
            snapshot=self._pending_snapshot,
            messages=self._messages,
            committed=self._committed_batch(self._applied_handed + 1),
            role=self.role,
            leader_id=self._leader_id,
            term=self._term,
            commit_index=self._commit_index,
            compacted_to=self._compacted_to,
        )
        self._hs_dirty = False
        self._log.pending_truncate = None
        self._log.handed = self._log.last_index
        self._messages = []
        self._pending_snapshot = None
        if rd.committed:
            self._applied_handed = max(self._applied_handed, rd.committed[-1].index)
        self._compacted_to = None
        self._outstanding = True
        return rd

    def advance(self, ready: Ready, *, entries_durable: bool = True) -> None:
        """``ready`` is done. A leader may pass ``entries_durable=False`` for a Ready
        without hard state, snapshot or truncation whose entries are written but not yet
        fsync'd; it then reports them with ``entries_persisted`` once they are."""
        self._outstanding = False
        persisted = self._log.persisted
        if ready.snapshot is not None:
            persisted = max(persisted, ready.snapshot.meta.index)
        if ready.entries and entries_durable:
            persisted = max(persisted, ready.entries[-1].index)
        self._log.persisted = min(persisted, self._log.handed)
        if self._role == Role.LEADER:
            self._maybe_commit()

    def entries_persisted(self, index: int, term: int) -> None:
        """A leader's entries up to ``index``, written in ``term``, are now durable.

        Ignored once this member left that leadership: a leader never truncates its
        own log, but a follower may have replaced those entries since."""
        if self._role != Role.LEADER or term != self._term:
            return
        if index > self._log.persisted:
            self._log.persisted = min(index, self._log.handed)
            self._maybe_commit()

    # ------------------------------------------------------------------ roles

    def _change_role_to_candidate(self, term: int) -> None:
        if term < self._term:
            return
        self._known_max_term_in_group = max(self._known_max_term_in_group, term)
        if self._role == Role.LEADER:
            self._progress = {}
            self._heartbeat_round = None
            self._transfer = None
        self._role = Role.CANDIDATE
        self._leader_id = None

    def _change_role_to_follower(self, leader: str) -> None:
        if self._role == Role.LEADER:
            self._progress = {}
            self._heartbeat_round = None
            self._transfer = None
        self._role = Role.FOLLOWER
        self._leader_id = leader
        self._vote_round = None
        self._verified_index = 0
        self._last_leader_heartbeat = self._now
        if self._voted_for is None:
            # Following a leader counts as a vote for it in this term. DLedger never
            # re-votes within a term after a membership change, but this core does
            # (a candidate may campaign again at its current term), and without this
            # a node that never voted could help elect a second leader in the term
            # under a configuration grown since.
            self._voted_for = leader
            self._hs_dirty = True

    def _change_role_to_leader(self) -> None:
        self._role = Role.LEADER
        self._leader_id = self.id
        self._vote_round = None
        self._take_leadership_term = -1
        self._transfer = None
        self._progress = {}
        self._sync_progress()
        self._heartbeat_round = None
        self._last_send_heartbeat = _NEVER
        self._last_succ_heartbeat = self._now
        self._next_preferred_check = self._now + self.config.preferred_leader_check_interval
        self._append_new(EntryType.NOOP, b"")
        self._maintain_as_leader()
        self._broadcast_append()
        self._maybe_commit()

    def _catch_up_term(self, term: int) -> None:
        """A bigger term exists: become a candidate that adopts it on its next tick.

        A vote round in progress is abandoned: its term is already stale."""
        self._change_role_to_candidate(term)
        self._need_increase_term_immediately = True
        self._vote_round = None

    def _next_term(self) -> None:
        if self._known_max_term_in_group > self._term:
            self._term = self._known_max_term_in_group
        elif self._term < MAX_TERM:
            self._term += 1
        else:
            # No term left to store (elections alone never get here): revote in this
            # one, keeping the vote already given in it.
            return
        self._known_max_term_in_group = self._term
        self._voted_for = None
        self._hs_dirty = True

    def _get_next_time_to_request_vote(self) -> float:
        cfg = self.config
        if self.taking_leadership:
            low, high = cfg.min_take_leadership_vote_interval, cfg.max_take_leadership_vote_interval
        else:
            low, high = cfg.min_vote_interval, cfg.max_vote_interval
        return self._now + low + self._rng.random() * (high - low)

    # ------------------------------------------------------------------ maintain loops

    def _maintain_as_follower(self) -> None:
        cfg = self.config
        silence = self._now - self._last_leader_heartbeat
        if silence > cfg.max_heartbeat_leak * cfg.heartbeat_interval:
            # Learners forget the silent leader too (they never campaign): else they
            # would answer REJECT_ALREADY_HAS_LEADER for ever and stall every election.
            self._change_role_to_candidate(self._term)

    def _maintain_as_candidate(self) -> None:
        if self._vote_round is not None:
            if self._now >= self._vote_round.deadline:
                self._finish_vote_round()
            return
        if self._now < self._next_time_to_request_vote and not self._need_increase_term_immediately:
            return
        is_voter = self.id in self._voters
        if self._need_increase_term_immediately or (
            is_voter and self._last_parse_result == VoteParseResult.WAIT_TO_VOTE_NEXT
        ):
            self._next_term()
            self._last_parse_result = VoteParseResult.WAIT_TO_REVOTE
        if self._need_increase_term_immediately:
            self._next_time_to_request_vote = self._get_next_time_to_request_vote()
            self._need_increase_term_immediately = False
            return
        if is_voter:
            self._start_vote_round()

    def _start_vote_round(self) -> None:
        cfg = self.config
        self._round_counter += 1
        voters = self._voters
        tally = VoteTally(term=self._term, voter_count=len(voters))
        deadline = self._now + cfg.vote_round_timeout + self._rng.random() * cfg.max_vote_interval
        self._vote_round = _VoteRound(self._round_counter, tally, deadline, voters)
        for voter in sorted(voters):
            if voter == self.id:
                answer = self._answer_vote(
                    self.id,
                    self._term,
                    is_self=True,
                    ledger_end_index=self._log.last_index,
                    ledger_end_term=self._log.last_term,
                )
                tally.record(self.id, answer.code, answer.term)
            else:
                self._send(
                    VoteRequest(
                        src=self.id,
                        dst=voter,
                        term=self._term,
                        ledger_end_index=self._log.last_index,
                        ledger_end_term=self._log.last_term,
                        round=self._round_counter,
                    )
                )
        if tally.can_decide_early():
            self._finish_vote_round()

    def _finish_vote_round(self) -> None:
        assert self._vote_round is not None
        cfg = self.config
        outcome = self._vote_round.tally.parse()
        known_max = self._vote_round.tally.known_max_term_in_group
        self.last_vote_round = (self._vote_round.tally, outcome)
        self.rounds_finished += 1
        self._vote_round = None
        self._last_parse_result = outcome.result
        if outcome.result == VoteParseResult.PASSED:
            self._change_role_to_leader()
            return
        if outcome.result == VoteParseResult.REVOTE_IMMEDIATELY:
            return
        next_time = self._get_next_time_to_request_vote()
        if outcome.extra_wait_heartbeats:
            next_time += cfg.heartbeat_interval * cfg.max_heartbeat_leak
        if outcome.extra_wait_vote_interval:
            next_time += cfg.max_vote_interval
        self._next_time_to_request_vote = next_time
        if known_max > self._term:
            self._change_role_to_candidate(known_max)

    def _maintain_as_leader(self) -> None:
        cfg = self.config
        hb_round = self._heartbeat_round
        if hb_round is not None and self._now >= hb_round.deadline:
            self._finish_heartbeat_round()
            if self._role != Role.LEADER:
                return
        # The epsilon keeps float drift of the caller's tick times from skipping a beat.
        if self._now - self._last_send_heartbeat >= cfg.heartbeat_interval - _EPSILON:
            self._send_heartbeats()
            if self._role != Role.LEADER:
                return
        for peer, progress in self._progress.items():
            waiting = progress.inflight or progress.state == ProgressState.SNAPSHOT
            if waiting and self._now - progress.last_send >= cfg.append_retry_timeout:
                # A lost probe is repeated as is; a lost pipeline restarts after the match.
                probing = progress.state == ProgressState.PROBE
                self._probe(progress, progress.next_index if probing else progress.match_index + 1)
                self._send_append(peer)
        self._check_transfer()
        self._check_preferred_leader()

    # ------------------------------------------------------------------ votes

    def _answer_vote(
        self,
        candidate: str,
        term: int,
        *,
        is_self: bool,
        ledger_end_index: int,
        ledger_end_term: int,
    ) -> VoteResponse:
        state = VoterState(
            self_id=self.id,
            voters=self._voters,
            term=self._term,
            voted_for=self._voted_for,
            leader_id=self._leader_id,
            ledger_end_index=self._log.last_index,
            ledger_end_term=self._log.last_term,
            taking_leadership=self.taking_leadership,
        )
        answer = answer_vote(
            state, candidate, term, ledger_end_index, ledger_end_term, is_self=is_self
        )
        if answer.code == VoteResponseCode.ACCEPT and self._voted_for != candidate:
            self._voted_for = candidate
            self._hs_dirty = True
        elif answer.code == VoteResponseCode.REJECT_TERM_NOT_READY:
            self._catch_up_term(term)
        return VoteResponse(
            src=self.id, dst=candidate, term=answer.term, code=answer.code, request_term=term
        )

    def _handle_vote_request(self, msg: VoteRequest) -> None:
        response = self._answer_vote(
            msg.src,
            msg.term,
            is_self=False,
            ledger_end_index=msg.ledger_end_index,
            ledger_end_term=msg.ledger_end_term,
        )
        response.round = msg.round
        self._send(response)

    def _handle_vote_response(self, msg: VoteResponse) -> None:
        vote_round = self._vote_round
        if (
            vote_round is None
            or msg.round != vote_round.number
            or msg.request_term != vote_round.tally.term
            or msg.src not in vote_round.voters
        ):
            return
        if vote_round.tally.record(msg.src, msg.code, msg.term) and (
            vote_round.tally.can_decide_early()
        ):
            self._finish_vote_round()

    # ------------------------------------------------------------------ heartbeats

    def _send_heartbeats(self) -> None:
        self._last_send_heartbeat = self._now
        self._round_counter += 1
        voters = self._voters
        tally = HeartbeatTally(term=self._term, voter_count=len(voters))
        self._heartbeat_round = _HeartbeatRound(
            self._round_counter, tally, self._now + self.config.heartbeat_interval, voters
        )
        for peer in sorted(self._progress):
            self._send(
                HeartbeatRequest(
                    src=self.id,
                    dst=peer,
                    term=self._term,
                    commit_index=self._commit_index,
                    round=self._round_counter,
                )
            )
        if tally.can_decide_early():
            self._finish_heartbeat_round()

    def _finish_heartbeat_round(self) -> None:
        assert self._heartbeat_round is not None
        cfg = self.config
        tally = self._heartbeat_round.tally
        self._heartbeat_round = None
        # Any answer in this term shows a follower is with us: under load the
        # heartbeat answers queue behind appends (and the follower's fsync) while the
        # append answers keep arriving, which must not count as silence.
        heard = max(self._last_succ_heartbeat, self._quorum_heard_at())
        verdict = tally.verdict(
            silent_for=self._now - heard,
            max_silence=cfg.max_heartbeat_leak * cfg.heartbeat_interval,
        )
        if verdict == HeartbeatVerdict.SUCCEEDED:
            self._last_succ_heartbeat = self._now
        elif verdict == HeartbeatVerdict.RESEND_NOW:
            self._last_send_heartbeat = _NEVER
        elif verdict == HeartbeatVerdict.STEP_DOWN_BIGGER_TERM:
            self._change_role_to_candidate(tally.max_term)
        elif verdict in (
            HeartbeatVerdict.STEP_DOWN_INCONSISTENT_LEADER,
            HeartbeatVerdict.STEP_DOWN_LEAK,
        ):
            self._change_role_to_candidate(self._term)

    def _handle_heartbeat(self, msg: HeartbeatRequest) -> None:
        answer = answer_heartbeat(
            self_id=self.id,
            voters=self._voters,
            term=self._term,
            leader_id=self._leader_id,
            sender=msg.src,
            sender_term=msg.term,
        )
        if self._apply_leader_contact(answer.action, msg.src, msg.term):
            self._advance_follower_commit(msg.commit_index)
        self._send(
            HeartbeatResponse(
                src=self.id,
                dst=msg.src,
                term=self._term,
                code=answer.code,
                round=msg.round,
                last_index=self._log.last_index,
            )
        )

    def _apply_leader_contact(self, action: HeartbeatAnswerAction, leader: str, term: int) -> bool:
        """Side effects of a heartbeat-style answer; True if ``leader`` is our leader."""
        if action == HeartbeatAnswerAction.FOLLOW:
            self._change_role_to_follower(leader)
            return True
        if action == HeartbeatAnswerAction.REFRESH:
            self._last_leader_heartbeat = self._now
            return True
        if action == HeartbeatAnswerAction.STEP_TO_CANDIDATE:
            self._catch_up_term(term)
        return False

    def _handle_heartbeat_response(self, msg: HeartbeatResponse) -> None:
        if self._role != Role.LEADER:
            return
        progress = self._progress.get(msg.src)
        if progress is not None and msg.code == HeartbeatResponseCode.SUCCESS:
            progress.last_heard = self._now
            if progress.match_index < self._log.last_index:
                self._send_append(msg.src)
        hb_round = self._heartbeat_round
        if hb_round is None or msg.round != hb_round.number or msg.src not in hb_round.voters:
            return
        if hb_round.tally.record(msg.src, msg.code, msg.term) and hb_round.tally.can_decide_early():
            self._finish_heartbeat_round()

    # ------------------------------------------------------------------ replication: follower

    def _handle_append(self, msg: AppendRequest) -> None:
        answer = answer_heartbeat(
            self_id=self.id,
            voters=self._voters,
            term=self._term,
            leader_id=self._leader_id,
            sender=msg.src,
            sender_term=msg.term,
            check_membership=False,
        )
        if not self._apply_leader_contact(answer.action, msg.src, msg.term):
            self._send(
                AppendResponse(
                    src=self.id,
                    dst=msg.src,
                    term=self._term,
                    code=AppendResponseCode[answer.code.name],
                    prev_index=msg.prev_index,
                    last_index=self._log.last_index,
                    seq=msg.seq,
                )
            )
            return
        log = self._log
        prev_index, prev_term, entries = msg.prev_index, msg.prev_term, msg.entries
        if prev_index < log.snapshot_index:
            # Everything up to the snapshot is committed here, hence matches the leader.
            entries = [e for e in entries if e.index > log.snapshot_index]
            prev_index, prev_term = log.snapshot_index, log.snapshot_term
        elif log.term_at(prev_index) != prev_term:
            self._send(
                AppendResponse(
                    src=self.id,
                    dst=msg.src,
                    term=self._term,
                    code=AppendResponseCode.INCONSISTENT_STATE,
                    prev_index=msg.prev_index,
                    last_index=self._skip_back_hint(prev_index),
                    seq=msg.seq,
                )
            )
            return
        if (
            entries
            and entries[0].index == log.last_index + 1
            and all(e.type != EntryType.CONFIG for e in entries)
        ):
            # All new (none overlaps the log) and none changes the membership.
            log.extend(entries)
            entries = []
        for entry in entries:
            existing = log.term_at(entry.index)
            if existing == entry.term:
                continue
            if existing is not None:
                if entry.index <= self._commit_index:
                    raise AssertionError(
                        f"{self.id}: leader {msg.src} conflicts with committed {entry.index}"
                    )
                self._truncate(entry.index)
            self._append_entry(entry)
        match = msg.prev_index + len(msg.entries)
        self._verified_index = max(self._verified_index, match)
        self._advance_follower_commit(msg.commit_index)
        self._send(
            AppendResponse(
                src=self.id,
                dst=msg.src,
                term=self._term,
                code=AppendResponseCode.SUCCESS,
                prev_index=msg.prev_index,
                match_index=match,
                last_index=log.last_index,
                seq=msg.seq,
            )
        )

    def _skip_back_hint(self, prev_index: int) -> int:
        """The last index worth probing next: our last index (Raft's fast back-off) or, when the
        entry at ``prev_index`` has another term, the index before that whole term."""
        log = self._log
        if prev_index > log.last_index:
            return log.last_index
        conflict_term = log.term_at(prev_index)
        index = prev_index
        floor = max(self._commit_index, log.snapshot_index)
        while index - 1 > floor and log.term_at(index - 1) == conflict_term:
            index -= 1
        return index - 1

    def _advance_follower_commit(self, leader_commit: int) -> None:
        """Follower commit = min(leader commit, last index verified against this leader)."""
        commit = min(leader_commit, self._verified_index, self._log.last_index)
        if commit > self._commit_index:
            self._commit_index = commit

    def _handle_install_snapshot(self, msg: InstallSnapshotRequest) -> None:
        answer = answer_heartbeat(
            self_id=self.id,
            voters=self._voters,
            term=self._term,
            leader_id=self._leader_id,
            sender=msg.src,
            sender_term=msg.term,
            check_membership=False,
        )
        if not self._apply_leader_contact(answer.action, msg.src, msg.term):
            self._send(
                InstallSnapshotResponse(
                    src=self.id,
                    dst=msg.src,
                    term=self._term,
                    code=InstallSnapshotResponseCode[answer.code.name],
                    last_index=self._log.last_index,
                )
            )
            return
        meta = msg.snapshot.meta
        if meta.index > self._commit_index:
            self._log.restore(meta.index, meta.term)
            self._snapshot = msg.snapshot
            self._pending_snapshot = msg.snapshot
            self._base_membership = copy_membership(meta.membership)
            self._config_indexes = [
                i for i in self._config_indexes if meta.index < i <= self._log.last_index
            ]
            self._refresh_membership()
            self._commit_index = meta.index
            self._applied_handed = meta.index
        self._verified_index = max(self._verified_index, meta.index)
        self._send(
            InstallSnapshotResponse(
                src=self.id,
                dst=msg.src,
                term=self._term,
                code=InstallSnapshotResponseCode.SUCCESS,
                last_index=meta.index,
            )
        )

    def _handle_timeout_now(self, msg: TimeoutNowRequest) -> None:
        if (
            msg.term == self._term
            and self._role == Role.FOLLOWER
            and self._leader_id == msg.src
            and self.id in self._voters
        ):
            self._take_leadership_term = msg.term + 1
            self._catch_up_term(msg.term + 1)

    # ------------------------------------------------------------------ replication: leader

    def _send_append(self, peer: str) -> None:
        progress = self._progress[peer]
        cfg = self.config
        log = self._log
        while progress.state != ProgressState.SNAPSHOT and not progress.window_full(
            cfg.max_inflight_appends
        ):
            if progress.next_index <= log.snapshot_index:
                self._send_snapshot(peer, progress)
                return
            entries = log.batch(progress.next_index, cfg.max_batch_entries, cfg.max_batch_bytes)
            prev_index = progress.next_index - 1
            if not entries and (
                progress.state == ProgressState.REPLICATE or progress.match_index >= prev_index
            ):
                return  # nothing new; an empty push only probes an unverified prefix
            prev_term = log.term_at(prev_index)
            assert prev_term is not None
            self._append_seq += 1
            self._send(
                AppendRequest(
                    src=self.id,
                    dst=peer,
                    term=self._term,
                    prev_index=prev_index,
                    prev_term=prev_term,
                    entries=entries,
                    commit_index=self._commit_index,
                    seq=self._append_seq,
                )
            )
            last = prev_index + len(entries)
            progress.inflight.append(last)
            progress.last_send = self._now
            if progress.state != ProgressState.REPLICATE:
                return
            progress.next_index = last + 1

    def _probe(self, progress: Progress, next_index: int) -> None:
        """Drop the window and probe again; answers to older pushes are then ignored."""
        progress.probe_from(next_index)
        progress.reset_seq = self._append_seq

    def _send_snapshot(self, peer: str, progress: Progress) -> None:
        assert self._snapshot is not None
        progress.state = ProgressState.SNAPSHOT
        progress.inflight.clear()
        progress.last_send = self._now
        self._send(
            InstallSnapshotRequest(src=self.id, dst=peer, term=self._term, snapshot=self._snapshot)
        )

    def _broadcast_append(self) -> None:
        for peer in sorted(self._progress):
            self._send_append(peer)

    def _step_down_if_bigger_term(self, term: int) -> bool:
        """A follower answered with a bigger term: leave it to the election to settle."""
        if term <= self._term:
            return False
        self._catch_up_term(term)
        return True

    def _handle_append_response(self, msg: AppendResponse) -> None:
        if self._role != Role.LEADER:
            return
        if msg.code == AppendResponseCode.EXPIRED_TERM and self._step_down_if_bigger_term(msg.term):
            return
        progress = self._progress.get(msg.src)
        if progress is None or msg.term != self._term:
            return
        progress.last_heard = self._now
        if msg.code == AppendResponseCode.SUCCESS:
            if progress.state == ProgressState.SNAPSHOT:
                return
            if progress.acked(msg.match_index):
                self._maybe_commit()
            self._send_append(msg.src)
            self._check_transfer()
        elif msg.code == AppendResponseCode.INCONSISTENT_STATE:
            if (
                msg.prev_index <= progress.match_index
                or msg.seq <= progress.reset_seq
                or progress.state == ProgressState.SNAPSHOT
            ):
                return  # stale: that prefix matches, or the window was already reset
            # Raft's fast back-off: skip straight behind the follower's last entry, else step back
            # one.
            self._probe(progress, min(msg.last_index + 1, msg.prev_index))
            self._send_append(msg.src)
        elif msg.code == AppendResponseCode.TERM_NOT_READY:
            self._probe(progress, progress.match_index + 1)  # re-sent once it adopts our term

    def _handle_install_snapshot_response(self, msg: InstallSnapshotResponse) -> None:
        if self._role != Role.LEADER:
            return
        if msg.code == InstallSnapshotResponseCode.EXPIRED_TERM and (
            self._step_down_if_bigger_term(msg.term)
        ):
            return
        progress = self._progress.get(msg.src)
        if progress is None or msg.term != self._term:
            return
        progress.last_heard = self._now
        if msg.code != InstallSnapshotResponseCode.SUCCESS:
            return
        if progress.state == ProgressState.SNAPSHOT:
            self._probe(progress, msg.last_index + 1)
        if progress.acked(msg.last_index):
            self._maybe_commit()
        self._send_append(msg.src)
        self._check_transfer()

    def _maybe_commit(self) -> None:
        matches = [self.match_index(voter) for voter in self._voters]
        index = quorum_index(matches)
        # Only entries of the current term commit by counting (the NOOP unlocks the rest).
        if index > self._commit_index and self._log.term_at(index) == self._term:
            self._commit_index = index

    # ------------------------------------------------------------------ transfer

    def _check_transfer(self) -> None:
        transfer = self._transfer
        if transfer is None or self._role != Role.LEADER:
            return
        if self._now >= transfer.deadline:
            self._transfer = None  # give up: the leader serves writes again
            return
        sent_at = transfer.timeout_now_sent_at
        # A TimeoutNow can be lost (the target's connection was down, e.g. it has just
        # restarted): sent again while the target has not taken over, until the deadline.
        if sent_at is not None and self._now - sent_at < self.config.append_retry_timeout:
            return
        if self.match_index(transfer.target) >= self._log.last_index:
            transfer.timeout_now_sent_at = self._now
            self._send(TimeoutNowRequest(src=self.id, dst=transfer.target, term=self._term))

    def _check_preferred_leader(self) -> None:
        cfg = self.config
        preferred = cfg.preferred_leader_ids
        if not preferred or self.id in preferred or self._transfer is not None:
            return
        if self._now < self._next_preferred_check:
            return
        self._next_preferred_check = self._now + cfg.preferred_leader_check_interval
        live_window = cfg.max_heartbeat_leak * cfg.heartbeat_interval
        for candidate in preferred:
            progress = self._progress.get(candidate)
            if candidate not in self._voters or progress is None:
                continue
            if self._now - progress.last_heard > live_window:
                continue
            if self._log.last_index - progress.match_index <= cfg.max_transfer_gap:
                self.transfer_leadership(candidate, self._now)
                return

    # ------------------------------------------------------------------ membership

    def _config_base(self) -> Membership:
        self._require_writable_leader()
        if self._config_indexes and self._config_indexes[-1] > self._commit_index:
            raise ValueError("a membership change is still uncommitted")
        return self._membership

    def _change_membership(self, membership: Membership) -> int:
        index = self._append_new(EntryType.CONFIG, encode_membership(membership))
        self._broadcast_append()
        return index

    def _membership_at(self, index: int) -> Membership:
        configs = [i for i in self._config_indexes if i <= index]
        if configs:
            return decode_membership(self._log.entry(configs[-1]).data)
        return copy_membership(self._base_membership)

    def _refresh_membership(self) -> None:
        if self._config_indexes:
            self._membership = decode_membership(self._log.entry(self._config_indexes[-1]).data)
        else:
            self._membership = self._base_membership
        self._voters = frozenset(self._membership.voters)
        if self._role == Role.LEADER:
            self._sync_progress()

    def _quorum_heard_at(self) -> float:
        """The latest time by which a majority of voters (this leader included) had
        answered in this term."""
        heard = []
        for voter in self._voters:
            progress = self._progress.get(voter)
            if voter == self.id:
                heard.append(self._now)
            else:
                heard.append(progress.last_heard if progress is not None else float("-inf"))
        return quorum_index(heard)

    def _sync_progress(self) -> None:
        members = set(self._membership.voters) | set(self._membership.learners)
        members.discard(self.id)
        for peer in list(self._progress):
            if peer not in members:
                del self._progress[peer]
        for peer in members:
            if peer not in self._progress:
                self._progress[peer] = Progress(next_index=self._log.last_index + 1)

    # ------------------------------------------------------------------ log helpers

    def _require_writable_leader(self) -> None:
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader_id)
        if self._transfer is not None:
            raise TransferInProgressError(self._transfer.target)

    def _append_new(self, entry_type: EntryType, data: bytes) -> int:
        entry = Entry(index=self._log.last_index + 1, term=self._term, type=entry_type, data=data)
        self._append_entry(entry)
        return entry.index

    def _append_entry(self, entry: Entry) -> None:
        self._log.append(entry)
        if entry.type == EntryType.CONFIG:
            self._config_indexes.append(entry.index)
            self._refresh_membership()

    def _truncate(self, index: int) -> None:
        self._log.truncate_from(index)
        if self._config_indexes and self._config_indexes[-1] >= index:
            self._config_indexes = [i for i in self._config_indexes if i < index]
            self._refresh_membership()

    def _send(self, msg: Message) -> None:
        self._messages.append(msg)
