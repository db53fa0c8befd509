"""asyncio transport for remoting frames: one Connection class serves both ends.

A connection reads frames with a pure FrameDecoder, resolves responses to
pending requests by ``opaque`` and hands requests to a handler registry. A
bounded number of requests run at once per connection; when that many are in
flight the reader stops reading, so TCP pushes back on a fast sender.
A malformed or oversized frame closes that connection only, with a logged reason.
Frames written in one turn of the loop leave together (``CoalescingWriter``).

A server enforces its ``ServerLimits`` (see ``limits``): connections past the
maximum are closed on accept; each connection's reader meters its bytes as they
arrive (``metered``): an oversized frame is refused on its length prefix, and the
bytes of incomplete frames across all the server's connections come out of one
``ByteBudget``; the chunk that would exceed it closes its own connection. A
periodic sweep closes connections idle too long and those whose partial frame has
not arrived whole in time. Those close lines are rate-limited per kind: a flood of
bad connections is one line per interval.

Handlers registered with ``register_sync`` are plain functions called in the
reader itself, in frame order, with no task per frame: for cheap one-way
messages (Raft) whose handler never waits. Handlers registered with
``register_batch`` get the requests of their codes that one read brought, as one
list served by one task (a pipelining producer's sends, stored together).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ClassVar

from mqcluster.wire.budget import ByteBudget
from mqcluster.wire.coalesce import CoalescingWriter
from mqcluster.wire.deadlines import Deadlines
from mqcluster.wire.frame import (
    DEFAULT_MAX_FRAME_SIZE,
    FLAG_ONEWAY,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    ResponseCode,
    decode_frame,
    encode_frame,
)
from mqcluster.wire.limits import FRAME_PREFIX, ServerLimits, process_limits
from mqcluster.wire.memory import pin_mmap_threshold
from mqcluster.wire.metered import LimitExceeded, MeteredStreamReader
from mqcluster.wire.ratelog import RateLimitedLog

log = logging.getLogger(__name__)
_closing_log = RateLimitedLog(log)
"""Close reasons of connections that belong to no server (a client's own)."""

Handler = Callable[[RemotingCommand, "Connection"], Awaitable[RemotingCommand | None]]
SyncHandler = Callable[[RemotingCommand, "Connection"], "RemotingCommand | None"]
Answer = RemotingCommand | bytes
"""A response, or a whole response frame a handler encoded itself (with the request's
opaque): its hot path's answers need no command object and no general encoder."""
BatchHandler = Callable[[list[RemotingCommand], "Connection"], Awaitable[list[Answer]]]
Gate = Callable[[RemotingCommand, "Connection"], "RemotingCommand | None"]
"""Asked of every request before its handler (authentication and authorization): a
response refuses it, None lets it through."""

READ_SIZE = 1 << 20  # bytes asked of the stream per read; big frames arrive in few reads
STREAM_LIMIT = 1 << 20  # StreamReader buffer limit (it pauses the socket at twice this)


class RpcError(Exception):
    """A request failed: connection lost, timed out, or the peer is unreachable."""


class HandlerRegistry:
    """Maps request codes to async handlers; unknown codes get REQUEST_CODE_NOT_SUPPORTED."""

    def __init__(self) -> None:
        self._handlers: dict[int, Handler] = {}
        self._sync: dict[int, SyncHandler] = {}
        self._batch: dict[int, BatchHandler] = {}
        self.on_connection_closed: list[Callable[[Connection], None]] = []
        self.gate: Gate | None = None

    def register(self, code: int, handler: Handler) -> None:
        self._forget(code)
        self._handlers[int(code)] = handler

    def register_sync(self, code: int, handler: SyncHandler) -> None:
        """A handler that never waits, run in the connection's reader (no task per frame)."""
        self._forget(code)
        self._sync[int(code)] = handler

    def register_batch(self, code: int, handler: BatchHandler) -> None:
        """A handler of many requests at once, answering each in order (one answer per
        request); requests of codes with the same handler that arrive together are
        served together."""
        self._forget(code)
        self._batch[int(code)] = handler

    def _forget(self, code: int) -> None:
        for table in (self._handlers, self._sync, self._batch):
            table.pop(int(code), None)

    def batch_handler(self, code: int) -> BatchHandler | None:
        return self._batch.get(code)

    def sync_handler(self, code: int) -> SyncHandler | None:
        return self._sync.get(code)

    def call_sync(
        self, handler: SyncHandler, cmd: RemotingCommand, conn: Connection
    ) -> RemotingCommand | None:
        try:
            return handler(cmd, conn)
        except Exception as exc:
            return error_response(cmd, exc)

    async def dispatch(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        sync = self._sync.get(cmd.code)
        if sync is not None:
            return self.call_sync(sync, cmd, conn)
        batch = self._batch.get(cmd.code)
        if batch is not None:
            answer = (await self.dispatch_batch(batch, [cmd], conn))[0]
            return answer if isinstance(answer, RemotingCommand) else decode_frame(answer)
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f"request code {cmd.code} not supported",
            )
        try:
            return await handler(cmd, conn)
        except Exception as exc:
            return error_response(cmd, exc)

    @staticmethod
    async def dispatch_batch(handler: BatchHandler, cmds: list[RemotingCommand],
                             conn: Connection) -> list[Answer]:
        try:
            answers = await handler(cmds, conn)
            if len(answers) != len(cmds):
                raise RuntimeError(f"{len(answers)} answers to {len(cmds)} requests")
            return answers
        except Exception as exc:
            return [error_response(cmd, exc) for cmd in cmds]


def error_response(cmd: RemotingCommand, exc: Exception) -> RemotingCommand:
    """The answer to a request whose handler raised: the request's fault (invalid) or ours."""
    if isinstance(exc, FrameError):
        return cmd.response(ResponseCode.INVALID_REQUEST, remark=str(exc))
    if isinstance(exc, (KeyError, ValueError, TypeError)):
        log.info("bad request code=%s: %r", cmd.code, exc)
        return cmd.response(ResponseCode.INVALID_REQUEST, remark=f"invalid request: {exc!r}")
    log.error("handler for code %s failed", cmd.code, exc_info=exc)
    return cmd.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        registry: HandlerRegistry | None = None,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_in_flight: int = 256,
        closing_log: RateLimitedLog = _closing_log,
    ) -> None:
        self.reader = reader
        self.writer = CoalescingWriter(writer)
        self.registry = registry or HandlerRegistry()
        self.decoder = FrameDecoder(max_frame_size)
        # A server's connection: its reader meters partial frames and arrival times.
        self._metered = reader if isinstance(reader, MeteredStreamReader) else None
        self._closing_log = closing_log
        # (Python 3.11 asks the kernel for the pid on every get_running_loop().)
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._deadlines = Deadlines()
        self._opaque = itertools.count(1)
        # Requests being served, and the read loop's wait for room below the limit: a
        # plain count (a Semaphore's acquire scans its waiters on every request).
        self._max_in_flight = max_in_flight
        self._serving = 0
        self._room: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()
        self.close_reason: str | None = None
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.attributes: dict[str, Any] = {}
        self.on_close: Callable[[Connection], None] | None = None
        """Called once as the connection closes (its server's count of connections)."""
        self._reader_task = self._loop.create_task(self._read_loop())

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    self.close_reason = "peer closed"
                    return
                cmds = self.decoder.feed(data)
                # (not kept through the next read's wait: a thousand connections would
                # each hold their last chunk, up to READ_SIZE)
                del data
                registry = self.registry
                # Requests for batch handlers, gathered per handler until the end of
                # this read (or until the in-flight limit is reached).
                batches: dict[BatchHandler, list[RemotingCommand]] = {}
                for cmd in cmds:
                    if cmd.is_response:
                        fut = self._pending.pop(cmd.opaque, None)
                        if fut is not None and not fut.done():
                            fut.set_result(cmd)
                        continue
                    gate = registry.gate
                    if gate is not None:
                        refused = gate(cmd, self)
                        if refused is not None:
                            self._answer(cmd, refused)
                            continue
                    sync = registry.sync_handler(cmd.code)
                    if sync is not None:
                        resp = registry.call_sync(sync, cmd, self)
                        if resp is not None and not cmd.is_oneway and not self.closed:
                            resp.opaque = cmd.opaque
                            self.writer.write(encode_frame(resp))
                        continue
                    if self._serving >= self._max_in_flight:
                        self._start_batches(batches)
                        self._room = self._loop.create_future()
                        await self._room
                    self._serving += 1
                    handler = registry.batch_handler(cmd.code)
                    if handler is not None:
                        batches.setdefault(handler, []).append(cmd)
                    else:
                        self._start(self._serve(cmd))
                self._start_batches(batches)
        except LimitExceeded as exc:
            self._close_for("limit", str(exc))
        except FrameError as exc:
            self._close_for("malformed", f"malformed frame: {exc}")
        except (ConnectionError, OSError) as exc:
            self.close_reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            self.close_reason = self.close_reason or "closed"
        except Exception as exc:
            # (a bug, whatever the peer sent: this connection ends, the task does not fail)
            self._close_for("internal", f"reader failed: {exc!r}")
        finally:
            self._shutdown()

    def _close_for(self, kind: str, reason: str, level: int = logging.WARNING) -> None:
        self.close_reason = reason
        self._closing_log.log(level, kind, "closing connection from %s: %s", self.peer, reason)

    def expired(self, now: float, idle_seconds: float,
                frame_deadline_seconds: float) -> tuple[str, str] | None:
        """Whether this server connection is past its time at ``now``: ``("deadline",
        why)`` for a partial frame older than the deadline, ``("idle", why)`` if nothing
        arrived and nothing was served for too long, else None. (A client's connection,
        unmetered, is never past its time.)"""
        metered = self._metered
        if metered is None:
            return None
        since = metered.partial_since
        if frame_deadline_seconds and since is not None \
                and now - since >= frame_deadline_seconds:
            return "deadline", (
                f"frame not whole {now - since:.0f} s after its first byte "
                f"({metered.held} bytes arrived; limit {frame_deadline_seconds:g} s)")
        last = metered.last_fed
        if idle_seconds and not self._serving and not self._pending \
                and now - last >= idle_seconds:
            return "idle", f"idle for {now - last:.0f} s (limit {idle_seconds:g} s)"
        return None

    def abort(self, kind: str, reason: str, level: int = logging.WARNING) -> None:
        """Close at once, dropping what is buffered either way (a limit was passed)."""
        if self.closed:
            return
        self._close_for(kind, reason, level)
        self._reader_task.cancel()
        with contextlib.suppress(Exception):
            self.writer.transport.abort()
        self._shutdown()

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_batches(self, batches: dict[BatchHandler, list[RemotingCommand]]) -> None:
        for handler, cmds in batches.items():
            self._start(self._serve_batch(handler, cmds))
        batches.clear()

    async def _serve(self, cmd: RemotingCommand) -> None:
        try:
            resp = await self.registry.dispatch(cmd, self)
            self._answer(cmd, resp)
            await self.writer.drain()
        except (ConnectionError, OSError, FrameError):
            pass  # (drain re-raises the reader's error: the read loop says why it closed)
        finally:
            self._served(1)

    async def _serve_batch(self, handler: BatchHandler, cmds: list[RemotingCommand]) -> None:
        try:
            answers = await self.registry.dispatch_batch(handler, cmds, self)
            for cmd, resp in zip(cmds, answers, strict=True):
                self._answer(cmd, resp)
            await self.writer.drain()
        except (ConnectionError, OSError, FrameError):
            pass  # (drain re-raises the reader's error: the read loop says why it closed)
        finally:
            self._served(len(cmds))

    def _answer(self, cmd: RemotingCommand, resp: Answer | None) -> None:
        if resp is not None and not cmd.is_oneway and not self.closed:
            if type(resp) is bytes:
                self.writer.write(resp)
            else:
                assert isinstance(resp, RemotingCommand)
                resp.opaque = cmd.opaque
                self.writer.write(encode_frame(resp))

    def _served(self, n: int) -> None:
        self._serving -= n
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)

    def _shutdown(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RpcError(f"connection to {self.peer} closed"))
        self._pending.clear()
        self._deadlines.close()
        self.decoder.reset()
        if self._metered is not None:
            self._metered.release()
        with contextlib.suppress(Exception):
            self.writer.close()
        if self.on_close is not None:
            self.on_close(self)
        for cb in self.registry.on_connection_closed:
            cb(self)

    def invoke(self, cmd: RemotingCommand,
               timeout: float = 3.0) -> Coroutine[Any, Any, RemotingCommand]:
        """Send ``cmd`` and await its response (``RpcError`` on close or timeout)."""
        def frame_for(opaque: int) -> bytes:
            cmd.opaque = opaque
            return encode_frame(cmd)

        return self.invoke_frame(cmd.code, frame_for, timeout)

    def invoke_frame(self, code: int, frame_for: Callable[[int], bytes],
                     timeout: float = 3.0) -> Coroutine[Any, Any, RemotingCommand]:
        """``invoke`` of a request written straight to its frame, ``frame_for(opaque)``
        (a hot path's template). Neither is a coroutine function: the caller awaits the
        exchange itself, one coroutine fewer per request."""
        if self.closed:
            raise RpcError(f"connection to {self.peer} closed")
        opaque = next(self._opaque)
        return self._exchange(code, opaque, frame_for(opaque), timeout)

    async def _exchange(self, code: int, opaque: int, frame: bytes,
                        timeout: float) -> RemotingCommand:
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending[opaque] = fut
        self._deadlines.add(fut, timeout)
        try:
            self.writer.write(frame)
            if self.writer.backed_up:
                await self.writer.drain()
            return await fut
        except TimeoutError as exc:  # (an OSError: caught first)
            raise RpcError(f"request code {code} to {self.peer} timed out") from exc
        except (ConnectionError, OSError) as exc:
            raise RpcError(f"send to {self.peer} failed: {exc}") from exc
        finally:
            self._pending.pop(opaque, None)

    async def send_oneway(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise RpcError(f"connection to {self.peer} closed")
        cmd.opaque = next(self._opaque)
        cmd.flag |= FLAG_ONEWAY
        try:
            self.writer.write(encode_frame(cmd))
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise RpcError(f"send to {self.peer} failed: {exc}") from exc

    async def close(self) -> None:
        self._reader_task.cancel()
        try:
            await self._reader_task
        except asyncio.CancelledError:
            # Swallow only the reader's own cancellation, never the caller's.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                self._shutdown()
                raise
        except Exception:
            log.debug("reader of %s ended with an error", self.peer, exc_info=True)
        self._shutdown()
        for task in list(self._tasks):
            task.cancel()


class RpcServer:
    """Accepts connections and serves requests from a HandlerRegistry, within ``limits``
    (the process's limits when none are given; ``max_frame_size`` overrides theirs).

    ``clock`` (monotonic seconds) times idle connections and partial frames; ``sweep``
    closes the ones past their time, and runs every ``sweep_interval`` seconds."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: HandlerRegistry,
        *,
        max_frame_size: int | None = None,
        max_in_flight: int = 256,
        limits: ServerLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        sweep_interval: float = 1.0,
        on_accept: Callable[[Connection], None] | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.registry = registry
        limits = limits or process_limits()
        if max_frame_size is not None:
            limits = dataclasses.replace(
                limits, max_frame_size=max_frame_size,
                max_partial_bytes=max(limits.max_partial_bytes, max_frame_size + FRAME_PREFIX))
        self.limits = limits
        self.max_frame_size = limits.max_frame_size
        self.max_in_flight = max_in_flight
        self.budget = ByteBudget(limits.max_partial_bytes)
        self.clock = clock
        self.sweep_interval = sweep_interval
        self.closing_log = RateLimitedLog(log, clock=clock)
        self.on_accept = on_accept
        """Called with each connection admitted (not with those refused)."""
        self.connections: set[Connection] = set()
        self.refused = 0
        """Connections closed on accept because the server had ``max_connections``."""
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        pin_mmap_threshold()  # (peers' chunks, once freed, must not stay resident)
        loop = asyncio.get_running_loop()

        def protocol() -> asyncio.StreamReaderProtocol:
            # (asyncio.start_server's factory, with a metered reader)
            reader = MeteredStreamReader(self.budget, self.max_frame_size, self.clock,
                                         limit=STREAM_LIMIT)
            return asyncio.StreamReaderProtocol(reader, self._accept)

        self._server = await loop.create_server(protocol, self.host, self.port,
                                                backlog=self.limits.listen_backlog)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        if self.limits.idle_seconds or self.limits.frame_deadline_seconds:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.limits.max_connections:
            self.refused += 1
            peer = writer.get_extra_info("peername")
            self.closing_log.warning(
                "connections", "refusing connection from %s: %d connections open (limit %d)",
                peer, len(self.connections), self.limits.max_connections)
            writer.transport.abort()
            return
        conn = Connection(reader, writer, self.registry, max_frame_size=self.max_frame_size,
                          max_in_flight=self.max_in_flight, closing_log=self.closing_log)
        self.connections.add(conn)
        conn.on_close = self.connections.discard  # (counted out as it closes, not later)
        if self.on_accept is not None:
            self.on_accept(conn)
        try:
            await conn.wait_closed()
        except asyncio.CancelledError:
            # Server shutdown cancels the accept callbacks; the connection is closed in stop().
            pass
        finally:
            self.connections.discard(conn)

    def sweep(self) -> int:
        """Close the connections idle too long or whose partial frame is past its
        deadline, as of ``clock()``; how many were closed."""
        now = self.clock()
        idle, deadline = self.limits.idle_seconds, self.limits.frame_deadline_seconds
        closed = 0
        for conn in list(self.connections):
            expired = conn.expired(now, idle, deadline)
            if expired is not None:
                kind, reason = expired
                # (an idle peer is routine, as RocketMQ's idle closes are: not a warning)
                conn.abort(kind, reason, logging.INFO if kind == "idle" else logging.WARNING)
                closed += 1
        return closed

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                self.sweep()
            except Exception:
                log.exception("sweep of idle connections failed")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host, int(port)


class RpcClient:
    """Keeps one connection per address, reconnecting on demand."""

    process_signer: ClassVar[Callable[[RemotingCommand], None] | None] = None
    """The signer of clients made without one: set once by a one-shot tool (mqadmin
    with credentials), so every client it makes signs."""

    def __init__(
        self,
        registry: HandlerRegistry | None = None,
        *,
        connect_timeout: float = 1.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        signer: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        """``signer`` is given every request before it leaves (RocketMQ's RPC hook:
        it adds the credentials' ext fields)."""
        self.registry = registry or HandlerRegistry()
        self.signer = signer or RpcClient.process_signer
        self.connect_timeout = connect_timeout
        self.max_frame_size = max_frame_size
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _open_connection(self, addr: str) -> Connection | None:
        conn = self._conns.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def connection(self, addr: str) -> Connection:
        conn = self._open_connection(addr)
        if conn is not None:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._open_connection(addr)
            if conn is not None:
                return conn
            host, port = split_addr(addr)
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, limit=STREAM_LIMIT), self.connect_timeout
                )
            except (OSError, TimeoutError) as exc:
                raise RpcError(f"cannot connect to {addr}: {exc or 'timeout'}") from exc
            conn = Connection(reader, writer, self.registry, max_frame_size=self.max_frame_size)
            self._conns[addr] = conn
            return conn

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        # An open connection is taken without the coroutine of ``connection``.
        conn = self._open_connection(addr) or await self.connection(addr)
        if self.signer is not None:
            self.signer(cmd)
        return await conn.invoke(cmd, timeout)

    async def invoke_frame(self, addr: str, code: int, frame_for: Callable[[int], bytes],
                           timeout: float = 3.0) -> RemotingCommand:
        """``Connection.invoke_frame`` on the connection to ``addr``."""
        conn = self._open_connection(addr) or await self.connection(addr)
        signer = self.signer
        if signer is not None:
            unsigned = frame_for

            def frame_for(opaque: int) -> bytes:
                # (a pre-encoded frame is opened to add the signature's fields)
                cmd = decode_frame(unsigned(opaque))
                signer(cmd)
                return encode_frame(cmd)

        return await conn.invoke_frame(code, frame_for, timeout)

    async def send_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.connection(addr)
        if self.signer is not None:
            self.signer(cmd)
        await conn.send_oneway(cmd)

    async def close(self) -> None:
        for conn in list(self._conns.values()):
            await conn.close()
        self._conns.clear()
