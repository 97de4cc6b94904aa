"""A recording TCP proxy: what a real client and a real server said to each other, byte for byte.

``with tap(upstream_port) as wire:`` listens on a free 127.0.0.1 port (``wire.url``) and copies every
connection to the upstream both ways, keeping all bytes. ``wire.exchanges()`` (after the client is done)
parses them with h11 into one :class:`Exchange` per HTTP request: the request line, headers and body,
and the response's status, headers and body *after* de-chunking, i.e. exactly the bytes the app's
``http.response.body`` messages carried. That is what "byte for byte" compares: the agent SDKs' own
clients talk through the tap, unaware of it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import h11

from .servers import free_port


@dataclass
class Exchange:
    method: str
    target: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    cut: bool = False  # the response ended without its end (no last chunk)

    def header(self, name: str, default: str | None = None) -> str | None:
        return next((v for k, v in self.headers if k == name), default)


@dataclass
class _Connection:
    sent: bytearray = field(default_factory=bytearray)  # client -> server
    received: bytearray = field(default_factory=bytearray)  # server -> client
    done: threading.Event = field(default_factory=threading.Event)


def _pump(source: socket.socket, sink: socket.socket, record: bytearray) -> None:
    try:
        while chunk := source.recv(65536):
            record += chunk
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class Tap:
    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections: list[_Connection] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False

    def serve(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            conn = _Connection()
            self.connections.append(conn)
            threading.Thread(target=self._relay, args=(client, conn), daemon=True).start()

    def _relay(self, client: socket.socket, conn: _Connection) -> None:
        server = socket.create_connection(("127.0.0.1", self.upstream))
        back = threading.Thread(target=_pump, args=(server, client, conn.received), daemon=True)
        back.start()
        _pump(client, server, conn.sent)
        back.join(30)
        client.close()
        server.close()
        conn.done.set()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def exchanges(self, timeout: float = 10.0) -> list[Exchange]:
        """Every request/response so far, connection by connection, in order. Waits (up to ``timeout``
        per connection) for connections to end: a client closes its connections when it is done."""
        out: list[Exchange] = []
        for conn in list(self.connections):
            conn.done.wait(timeout)
            out += parse(bytes(conn.sent), bytes(conn.received))
        return out


def parse(sent: bytes, received: bytes) -> list[Exchange]:
    """The exchanges of one HTTP/1.1 connection from its two byte streams (h11 on both sides)."""
    server_side = h11.Connection(h11.SERVER)
    client_side = h11.Connection(h11.CLIENT)
    server_side.receive_data(sent)
    server_side.receive_data(b"")
    client_side.receive_data(received)
    client_side.receive_data(b"")
    out: list[Exchange] = []
    while True:
        event = server_side.next_event()
        if not isinstance(event, h11.Request):
            return out
        exchange = Exchange(
            event.method.decode(),
            event.target.decode(),
            {k.decode(): v.decode() for k, v in event.headers},
            b"",
        )
        client_side.send(event)
        while not isinstance(event := server_side.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            exchange.request_body += event.data
            client_side.send(event)
        client_side.send(event)
        out.append(exchange)
        while True:
            try:
                reply = client_side.next_event()
            except h11.RemoteProtocolError:  # the connection ended inside the body: a cut stream
                exchange.cut = True
                return out
            if isinstance(reply, h11.Response):
                exchange.status = reply.status_code
                exchange.headers = [(k.decode(), v.decode()) for k, v in reply.headers]
            elif isinstance(reply, h11.Data):
                exchange.body += reply.data
            elif not isinstance(reply, (h11.EndOfMessage, h11.InformationalResponse)):
                return out  # nothing more on this connection
            server_side.send(reply)  # the server's side of the parse follows the response too
            if isinstance(reply, h11.EndOfMessage):
                break
        if client_side.our_state is h11.DONE and client_side.their_state is h11.DONE:
            client_side.start_next_cycle()
            server_side.start_next_cycle()
        else:
            return out


@contextlib.contextmanager
def tap(upstream: int) -> Iterator[Tap]:
    wire = Tap(upstream)
    thread = threading.Thread(target=wire.serve, daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        wire.close()
