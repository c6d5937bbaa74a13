#!/usr/bin/env python3
"""Interop cases in the style of the QUIC interop runner, with aioquic's client (its own QUIC,
TLS and QPACK, in Python) against a running Squall.

Not part of the test suite: aioquic is not packaged for Debian 12, so CI cannot install it.
Run by hand (`pip install aioquic`), through `tests/interop/run.sh`, which starts Squall with
the configs each case needs and prints the table docs/TESTING.md keeps.

    aioquic_interop.py CASE HOST:PORT [--big PATH BYTES]

CASE is one of: handshake, transfer, multiplexing, retry, resumption, zerortt, chacha20,
keyupdate, v2. Exit status 0: the case passed; 1: it failed (the reason on stderr); 2: not
supported by one side (the reason on stderr).
"""

import asyncio
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


async def run(case, host, port, big):
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
    try:
        ok, detail = asyncio.run(asyncio.wait_for(run(case, host, int(port), big), 60))
    except Exception as e:  # the case failed, whatever went wrong
        print(f"{case}: error: {e!r}", file=sys.stderr)
        sys.exit(1)
    print(f"{case}: {detail}")
    sys.exit(0 if ok else (2 if ok is None else 1))


if __name__ == "__main__":
    main()
