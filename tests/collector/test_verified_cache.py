"""The native walk remembers passages it proved to hash to their content hash (issue 35), and the
check stays as strict: a later request is compared byte for byte with the proven text instead of
hashing it again, so a forged text under a proven hash is still refused, per tenant, and what is
remembered stays within its bound."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest

from ragtrace import semconv as sc
from ragtrace_collector import native_walk
from ragtrace_collector.assemble import assemble_body
from ragtrace_collector.rows import Rows
from ragtrace_collector.spans import HASH_MISMATCH
from tests import otlp_builders as T

TEXT = "The Danube flows through ten countries, more than any other river in the world."


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _doc(field: str) -> str:
    return sc.document_attribute(sc.RETRIEVAL_DOCUMENTS, 0, field)


def _body(text: str, claimed: str) -> bytes:
    trace_id = os.urandom(16).hex()
    root = T.SpanSpec(trace_id, os.urandom(8).hex(), "answer", {sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: "rivers?"})
    retrieval = T.SpanSpec(trace_id, os.urandom(8).hex(), "retrieve",
                           {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "rivers?", _doc(sc.DOCUMENT_ID): "danube",
                            _doc(sc.DOCUMENT_CONTENT): text, _doc(sc.DOCUMENT_CONTENT_HASH): claimed},
                           parent=root.span_id)
    return T.request([root, retrieval]).SerializeToString()


def _walk(text: str, claimed: str, tenant: str = "t1") -> Rows:
    return assemble_body(_body(text, claimed), tenant, 1_700_000_000_000)


def _stats() -> tuple[int, int, int, int]:
    entries, size, compared, hashed = native_walk.require().verified_cache_stats()
    return entries, size, compared, hashed


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    native_walk.require().verified_cache(native_walk.VERIFIED_TEXT_BYTES)
    yield
    native_walk.require().verified_cache(native_walk.VERIFIED_TEXT_BYTES)


def test_a_passage_sent_again_is_compared_not_hashed() -> None:
    assert _walk(TEXT, _sha(TEXT)).rejected == 0
    assert _stats()[2:] == (0, 1)
    assert _walk(TEXT, _sha(TEXT)).rejected == 0
    assert _stats()[2:] == (1, 1)  # the second request compared it with the proven text


def test_a_forged_text_under_a_proven_hash_is_still_refused() -> None:
    _walk(TEXT, _sha(TEXT))
    forged = TEXT.replace("ten", "eleven")
    rows = _walk(forged, _sha(TEXT))
    assert rows.rejected == 1 and HASH_MISMATCH in rows.error_message()
    assert rows.cols["passages"]["content"] == [] and not rows.arrow.get("documents")
    # same length, one byte different: still refused
    rows = _walk(TEXT[:-1] + "!", _sha(TEXT))
    assert rows.rejected == 1
    assert _walk(TEXT, _sha(TEXT)).rejected == 0  # the proven text itself still goes in


def test_a_wrong_hash_is_refused_and_not_remembered() -> None:
    rows = _walk(TEXT, _sha("another text"))
    assert rows.rejected == 1 and HASH_MISMATCH in rows.error_message()
    assert _stats()[0] == 0


def test_what_one_tenant_proved_is_hashed_again_for_another() -> None:
    _walk(TEXT, _sha(TEXT), tenant="t1")
    _walk(TEXT, _sha(TEXT), tenant="t2")
    assert _stats()[2:] == (0, 2)
    assert _walk(TEXT.upper(), _sha(TEXT), tenant="t2").rejected == 1


def test_the_cache_stays_within_its_bound() -> None:
    bound = 4096
    native_walk.require().verified_cache(bound)
    texts = [f"passage {i}: " + "x" * 300 for i in range(40)]
    for text in texts:
        assert _walk(text, _sha(text)).rejected == 0
        entries, size, _, _ = _stats()
        assert size <= bound
    assert 0 < entries < len(texts)  # the oldest went out
    assert _walk(texts[-1], _sha(texts[-1])).rejected == 0
    assert _stats()[2] == 1  # the newest is still there
    assert _walk(texts[0], _sha(texts[0])).rejected == 0
    assert _stats()[3] == len(texts) + 1  # the oldest was not: hashed again, and accepted
    big = "y" * 2000  # more than a quarter of the bound: checked, never kept
    assert _walk(big, _sha(big)).rejected == 0 and _walk(big, _sha(big)).rejected == 0
    assert _stats()[3] == len(texts) + 3
    assert _walk(big + "z", _sha(big)).rejected == 1


def test_a_bound_of_zero_keeps_nothing_and_still_checks() -> None:
    native_walk.require().verified_cache(0)
    assert _walk(TEXT, _sha(TEXT)).rejected == 0 and _walk(TEXT, _sha(TEXT)).rejected == 0
    assert _stats() == (0, 0, 0, 2)
    assert _walk(TEXT + ".", _sha(TEXT)).rejected == 1
    with pytest.raises(ValueError, match="max_bytes"):
        native_walk.require().verified_cache(-1)
