#!/usr/bin/env python3
"""Interop cases in the style of the QUIC interop runner, with aioquic's client (its own QUIC,
TLS and QPACK, in Python) against a running Squall.

Not part of the test suite: aioquic is not packaged for Debian 12, so CI cannot install it.
Run by hand (`pip install aioquic`), through `tests/interop/run.sh`, which starts Squall with
the configs each case needs and prints the table docs/TESTING.md keeps.

    aioquic_interop.py CASE HOST:PORT [--big PATH BYTES] [--origin-port PORT]

CASE is one of: handshake, transfer, multiplexing, retry, resumption, zerortt, chacha20,
keyupdate, v2, websocket (RFC 9220: an extended CONNECT to `/ws`, which Squall proxies as an
HTTP/1.1 upgrade to the WebSocket origin this script runs on `--origin-port`). Exit status 0: the case passed; 1: it failed (the reason on stderr); 2: not
supported by one side (the reason on stderr).
"""

import asyncio
import base64
import hashlib
import ssl
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicProtocolVersion
from aioquic.tls import CipherSuite


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.pending = {}

    def quic_event_received(self, event):
        for h3_event in self.h3.handle_event(event):
            sid = getattr(h3_event, "stream_id", None)
            if sid not in self.pending:
                continue
            response = self.pending[sid]
            if isinstance(h3_event, HeadersReceived):
                if response["headers"] is None:
                    response["headers"] = dict(h3_event.headers)
                if h3_event.stream_ended:
                    response["done"].set_result(response)
            elif isinstance(h3_event, DataReceived):
                response["body"] += h3_event.data
                if h3_event.stream_ended:
                    response["done"].set_result(response)

    async def request(self, authority, path, method=b"GET"):
        sid = self._quic.get_next_available_stream_id()
        done = asyncio.get_running_loop().create_future()
        self.pending[sid] = {"headers": None, "body": b"", "done": done}
        headers = [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
        ]
        self.h3.send_headers(sid, headers, end_stream=True)
        self.transmit()
        response = await asyncio.wait_for(done, 30)
        return int(response["headers"][b":status"]), response["body"]

    async def websocket(self, authority, path, message):
        """RFC 9220: an extended CONNECT with `:protocol websocket`; once answered 200, one
        masked WebSocket text frame goes out on the stream and the origin's echo comes back.
        Returns the status, whether the server's SETTINGS offered extended CONNECT, and the
        bytes that came back."""
        sid = self._quic.get_next_available_stream_id()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.pending[sid] = {"headers": None, "body": b"", "done": done}
        headers = [
            (b":method", b"CONNECT"),
            (b":protocol", b"websocket"),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"sec-websocket-version", b"13"),
        ]
        self.h3.send_headers(sid, headers, end_stream=False)
        self.transmit()
        while self.pending[sid]["headers"] is None:
            await asyncio.sleep(0.01)
        status = int(self.pending[sid]["headers"][b":status"])
        offered = self.h3.received_settings.get(0x8) == 1
        if status != 200:
            return status, offered, b""
        mask = b"\x01\x02\x03\x04"
        frame = bytes([0x81, 0x80 | len(message)]) + mask
        frame += bytes(b ^ mask[i % 4] for i, b in enumerate(message))
        self.h3.send_data(sid, frame, end_stream=True)
        self.transmit()
        response = await asyncio.wait_for(done, 30)
        return status, offered, response["body"], frame


async def websocket_origin(port):
    """A WebSocket origin on 127.0.0.1:`port`: answers the upgrade with the accept RFC 6455
    §4.2.2 computes from the key Squall sent, then echoes every byte until the FIN."""

    async def serve(reader, writer):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        fields = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in head.split("\r\n")[1:])
            if name
        )
        key = fields.get("sec-websocket-key", "")
        guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        accept = base64.b64encode(hashlib.sha1((key + guid).encode()).digest()).decode()
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept.encode() + b"\r\n\r\n"
        )
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", port)


def configuration(**changes):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    for name, value in changes.items():
        setattr(config, name, value)
    return config


async def fetch(host, port, config, paths, wait_connected=True, tickets=None):
    async with connect(
        host,
        port,
        configuration=config,
        create_protocol=Client,
        session_ticket_handler=tickets.append if tickets is not None else None,
        wait_connected=wait_connected,
    ) as client:
        authority = f"localhost:{port}"
        answers = await asyncio.gather(*(client.request(authority, p) for p in paths))
        tls = client._quic.tls
        return answers, tls, client._quic


async def run(case, host, port, big, origin_port):
    tickets = []
    if case == "handshake":
        (answer,), _, _ = await fetch(host, port, configuration(), ["/"])
        return answer[0] == 200, f"status {answer[0]}"
    if case == "transfer":
        path, size = big
        (answer,), _, _ = await fetch(host, port, configuration(), [path])
        ok = answer[0] == 200 and len(answer[1]) == size
        return ok, f"status {answer[0]}, {len(answer[1])} of {size} bytes"
    if case == "multiplexing":
        answers, _, _ = await fetch(host, port, configuration(), ["/"] * 200)
        ok = all(status == 200 for status, _ in answers)
        return ok, f"{sum(s == 200 for s, _ in answers)} of 200 streams answered 200"
    if case == "retry":
        (answer,), _, quic = await fetch(host, port, configuration(), ["/"])
        retried = quic._retry_source_connection_id is not None
        return answer[0] == 200 and retried, f"status {answer[0]}, Retry seen: {retried}"
    if case in ("resumption", "zerortt"):
        await fetch(host, port, configuration(), ["/"], tickets=tickets)
        await asyncio.sleep(0.2)
        if not tickets:
            return False, "no session ticket received"
        second = configuration(session_ticket=tickets[-1])
        early = case == "zerortt"
        (answer,), tls, _ = await fetch(host, port, second, ["/"], wait_connected=not early)
        if not early:
            return answer[0] == 200 and tls.session_resumed, (
                f"status {answer[0]}, resumed: {tls.session_resumed}"
            )
        accepted = tls.early_data_accepted
        return answer[0] == 200 and accepted, f"status {answer[0]}, 0-RTT accepted: {accepted}"
    if case == "chacha20":
        config = configuration(cipher_suites=[CipherSuite.CHACHA20_POLY1305_SHA256])
        (answer,), tls, _ = await fetch(host, port, config, ["/"])
        suite = tls.key_schedule.cipher_suite
        ok = answer[0] == 200 and suite == CipherSuite.CHACHA20_POLY1305_SHA256
        return ok, f"status {answer[0]}, suite {suite.name}"
    if case == "keyupdate":
        async with connect(
            host, port, configuration=configuration(), create_protocol=Client
        ) as client:
            authority = f"localhost:{port}"
            first = await client.request(authority, "/")
            client._quic.request_key_update()
            second = await client.request(authority, "/")
            ok = first[0] == 200 and second[0] == 200
            return ok, f"before {first[0]}, after the key update {second[0]}"
    if case == "websocket":
        origin = await websocket_origin(origin_port)
        async with connect(
            host, port, configuration=configuration(), create_protocol=Client
        ) as client:
            answer = await client.websocket(f"localhost:{port}", "/ws", b"hello over h3")
        origin.close()
        status, offered, echoed = answer[0], answer[1], answer[2]
        ok = status == 200 and offered and len(answer) > 3 and echoed == answer[3]
        return ok, (
            f"SETTINGS_ENABLE_CONNECT_PROTOCOL {offered}, status {status}, "
            f"{len(echoed)} bytes of a WebSocket frame echoed"
        )
    if case == "v2":
        config = configuration(
            supported_versions=[QuicProtocolVersion.VERSION_2, QuicProtocolVersion.VERSION_1],
            original_version=QuicProtocolVersion.VERSION_2,
        )
        (answer,), _, quic = await fetch(host, port, config, ["/"])
        version = QuicProtocolVersion(quic._version).name
        if quic._version != QuicProtocolVersion.VERSION_2:
            return None, f"status {answer[0]} over {version}: QUIC v2 not offered by the server"
        return answer[0] == 200, f"status {answer[0]} over {version}"
    raise SystemExit(f"unknown case {case}")


def main():
    case, address = sys.argv[1], sys.argv[2]
    host, port = address.rsplit(":", 1)
    big = None
    if "--big" in sys.argv:
        at = sys.argv.index("--big")
        big = (sys.argv[at + 1], int(sys.argv[at + 2]))
    origin_port = None
    if "--origin-port" in sys.argv:
        origin_port = int(sys.argv[sys.argv.index("--origin-port") + 1])
    try:
        running = run(case, host, int(port), big, origin_port)
        ok, detail = asyncio.run(asyncio.wait_for(running, 60))
    except Exception as e:  # the case failed, whatever went wrong
        print(f"{case}: error: {e!r}", file=sys.stderr)
        sys.exit(1)
    print(f"{case}: {detail}")
    sys.exit(0 if ok else (2 if ok is None else 1))


if __name__ == "__main__":
    main()
