"""Memory per request within the bound whatever its span count; of two large requests one gets through.

Before, admission counted bytes only: one 63 MiB request of 1,082,334 attribute-less spans was admitted
and took the collector from 365 MB to 2.4 GB, and two large requests arriving together could both be
refused (each holding its body while the other's rows did not fit), again and again. Now what a
decode will hold is counted from the body before it is decoded (`request_cost`) and reserved with
the body; the oldest request may wait for room, the others yield. The campaign's shapes, scaled down,
against a real `ragtrace serve`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests import hostile_bodies as H

from ._serve import metric, serve, wait_for

PB = {"content-type": "application/x-protobuf"}
MiB = 1024 * 1024


def _status_kb(pid: int, key: str) -> int:
    found = re.search(rf"{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert found, key
    return int(found.group(1))


def _reason(r: httpx.Response) -> str:
    """The readable part of an OTLP Status (protobuf)."""
    return "".join(c for c in r.content.decode("utf-8", "replace") if c.isprintable())


def test_a_request_of_many_tiny_spans_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    body = H.tiny_spans(200_000)  # 11.6 MiB that would decode to about 400 MB
    with serve(tmp_path, "--max-inflight-bytes", str(128 * MiB)) as (url, _port, log, pid):
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
        rest = _status_kb(pid, "VmRSS")
        refused = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=120)
        grew_mb = (_status_kb(pid, "VmHWM") - rest) / 1024
        assert refused.status_code == 413, refused.status_code
        reason = _reason(refused)
        assert "200,000 spans" in reason and "--max-inflight-bytes" in reason
        assert "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" in reason
        # the body was received (about three copies of it while it arrives), nothing of it decoded
        assert grew_mb < 3 * len(body) / MiB + 60, grew_mb
        # one that fits is decoded and stored as ever
        ok = httpx.post(f"{url}/v1/traces", content=H.tiny_spans(20_000), headers=PB, timeout=120)
        assert ok.status_code == 200
        wait_for(lambda: metric(url, "ragtrace_held_bytes") == 0, 60, "everything held being given back")
        assert metric(url, 'ragtrace_requests_total{code="413"}') == 1
    assert "Traceback" not in log.read_text()


def test_of_two_requests_that_fit_alone_but_not_together_one_gets_through(tmp_path: Path) -> None:
    body = H.tiny_spans(18_000)  # about 40 MiB to decode: one fits in 64 MiB, two do not
    with serve(tmp_path, "--max-inflight-bytes", str(64 * MiB)) as (url, *_):
        alone = [httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=60).status_code for _ in range(2)]
        assert alone == [200, 200]
        for _ in range(5):
            barrier = threading.Barrier(2)
            answers: list[int] = []

            def send() -> None:
                barrier.wait()  # noqa: B023 (each round's own barrier, joined before the next)
                r = httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=60)
                answers.append(r.status_code)  # noqa: B023

            threads = [threading.Thread(target=send) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert 200 in answers and set(answers) <= {200, 429}, answers
        wait_for(lambda: metric(url, "ragtrace_held_bytes") == 0, 60, "everything held being given back")


def test_the_campaigns_requests_at_full_size(tmp_path: Path) -> None:
    """The campaign's own shapes against a server with the default bound (512 MiB): the 63 MiB request of
    1,082,334 attribute-less spans (admitted before, RSS 365 -> 2,364 MB) and two 64 MiB requests at once
    (both 429 before, though each alone got 200)."""
    tiny = H.tiny_spans(1_082_334)
    assert 62 * MiB < len(tiny) < 64 * MiB
    large = H.large_values(64 * MiB - 4096)
    with serve(tmp_path) as (url, _port, log, pid):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        rest = _status_kb(pid, "VmRSS")
        refused = httpx.post(f"{url}/v1/traces", content=tiny, headers=PB, timeout=60)
        assert refused.status_code == 413 and "1,082,334 spans" in _reason(refused)
        assert (_status_kb(pid, "VmHWM") - rest) / 1024 < 3 * len(tiny) / MiB + 60
        del tiny
        barrier = threading.Barrier(2)
        answers: list[int] = []

        def send() -> None:
            barrier.wait()
            answers.append(httpx.post(f"{url}/v1/traces", content=large, headers=PB, timeout=60).status_code)

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(answers) in ([200, 200], [200, 429]), answers
        wait_for(lambda: metric(url, "ragtrace_held_bytes") == 0, 60, "everything held being given back")
    assert "Traceback" not in log.read_text()


_COUNTS = """
import sys
from ragtrace_store import open_store
store = open_store(sys.argv[1], migrate=False)
for table in ("spans", "queries"):
    t = store.table(table)
    raw = store.query_rows(f"SELECT count(), uniqExact(trace_id) FROM {t}")[0]
    final = store.query_rows(f"SELECT count() FROM {t} FINAL")[0][0]
    print(table, raw[0], final, raw[1])
"""


def test_a_request_of_large_values_is_written_in_slices_within_the_bound(tmp_path: Path) -> None:
    """Before, one 64 MiB request of 64 KB values took the collector from 367 to 1,279 MB (beyond rest + the
    512 MiB bound): its rows were charged half of what they hold, the store's insert of them (one statement
    per table, about three times their bytes) was charged nowhere, and 949 MB stayed mapped after it. Now
    the insert goes in byte-bounded slices, rows and insert are charged until it is done, and what was
    freed goes back to the system."""
    body = H.large_values(64 * MiB - 4096)
    spans = (64 * MiB - 4096) // (64 * 1024 + 80)
    with serve(tmp_path) as (url, port, log, pid):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        rest = _status_kb(pid, "VmRSS")
        assert httpx.post(f"{url}/v1/traces", content=body, headers=PB, timeout=60).status_code == 200
        wait_for(lambda: metric(url, "ragtrace_held_bytes") == 0, 60, "the rows being written")
        grew_mib = (_status_kb(pid, "VmHWM") - rest) / 1024
        assert metric(url, "ragtrace_batches_total") == 1
        # spans and queries, about 67 MB each: several statements each (32 MiB slices: 3 each)
        assert metric(url, "ragtrace_store_insert_statements_total") >= 6
        assert grew_mib < 512, grew_mib  # rest + --max-inflight-bytes (measured: about +300)
        wait_for(lambda: metric(url, "ragtrace_memory_give_backs_total") >= 1, 10, "memory given back")
        # before, 949 MB (rest + 582) stayed mapped after such a request; now about rest + 60
        wait_for(lambda: _status_kb(pid, "VmRSS") - rest < 200 * 1024, 20, "RSS back near rest")
    assert "Traceback" not in log.read_text()
    out = subprocess.run([sys.executable, "-c", _COUNTS, str(tmp_path / f"store-{port}")], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    for line in out.splitlines():  # every span (and its query row) exactly once
        _table, raw, final, distinct = line.split()
        assert (int(raw), int(final), int(distinct)) == (spans, spans, spans), line
