"""Decoding a request within the admission bound: count what its decode will hold, reserve it, then decode.

Runs in one of the decoding threads (`ragtrace_collector.app`), for a body already received and charged
to the request's `Ticket`:

1. media type, size and ``Content-Encoding`` (`otlp.receive`); a gzip body is decompressed here, so its
   decompressed size is known before anything is parsed;
2. an OTLP/JSON body is turned into protobuf after reserving what that takes (`request_cost.json_decode_bytes`:
   its objects, arrays and strings become Python objects first), and that reservation is given back after;
3. the protobuf is counted (`request_cost.count`: spans, attributes, values, events) and what its walk
   will hold reserved (`request_cost.decode_bytes`); a body that is not valid protobuf is refused here;
4. the walk (`IngestPool.run`, the same as before) builds the rows.

A reservation that could never fit is a 413 naming the counts and what to do; one that does not fit now
a 429 (`Ticket.reserve`, which lets the oldest request wait). The caller gives back what the ticket
still holds when the request ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragtrace_collector.admission import Ticket, Verdict
from ragtrace_collector.ingest import IngestPool
from ragtrace_collector.otlp import JSON, PROTOBUF, OtlpError, parse_request, receive
from ragtrace_collector.request_cost import WireError, count, decode_bytes, json_decode_bytes
from ragtrace_collector.rows import Rows
from ragtrace_collector.writer import Backpressure

MiB = 1024 * 1024


def decode_within_bound(ticket: Ticket, pool: IngestPool, body: bytes, ctype: str | None, encoding: str | None,
                        tenant: str, received_ms: int, max_bytes: int,
                        written: Mapping[tuple[str, str], int] | None = None) -> tuple[Rows, bytes, int]:
    """(rows, spooled bytes, bytes reserved for the decode and still held by ``ticket``). Raises
    `OtlpError` (400, 413, 415) and `Backpressure` (429)."""
    raw, mt = receive(body, ctype, encoding, max_bytes)
    # a decompressed or converted copy is held beside the body for the whole decode
    copy = len(raw) if raw is not body else 0
    if mt == JSON:
        need = json_decode_bytes(raw) + copy
        _reserve(ticket, need, f"an OTLP/JSON body of {len(raw):,} bytes")
        try:
            raw = parse_request(raw, JSON).SerializeToString()
        finally:
            ticket.give_back(need)
        copy = len(raw)
    try:
        counts = count(raw)
    except WireError as exc:
        parse_request(raw, PROTOBUF)  # raises OtlpError with the protobuf parser's own reason
        raise OtlpError(400, f"malformed OTLP protobuf body: {exc}") from None
    need = decode_bytes(len(raw), counts) + copy
    _reserve(ticket, need, counts.describe())
    rows, spooled = pool.run(raw, PROTOBUF, None, tenant, received_ms, max(max_bytes, len(raw)), written)
    return rows, spooled, need


def _reserve(ticket: Ticket, need: int, what: str) -> None:
    verdict = ticket.reserve(need)
    limit = ticket.admission.limit
    if verdict is Verdict.TOO_LARGE:
        raise OtlpError(413, f"this request ({what}) needs about {need / MiB:,.0f} MiB to decode besides its "
                             f"{ticket.held / MiB:,.1f} MiB body, more than the {limit / MiB:,.0f} MiB the collector "
                             "holds for all requests at once (--max-inflight-bytes): send fewer spans per request "
                             "(e.g. OTEL_BSP_MAX_EXPORT_BATCH_SIZE), or raise --max-inflight-bytes")
    if verdict is Verdict.BUSY:
        raise Backpressure(429, 1, f"decoding this request ({what}) needs about {need / MiB:,.0f} MiB, more than "
                                   f"is free now under --max-inflight-bytes ({limit / MiB:,.0f} MiB, "
                                   f"{ticket.admission.held() / MiB:,.0f} MiB held): retry after the "
                                   "Retry-After seconds")
