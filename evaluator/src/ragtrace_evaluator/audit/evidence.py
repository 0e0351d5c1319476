"""Evidence-span gold resolved against one trace's chunks.

Gold stored as evidence spans (`ragtrace_store.GoldSpan`: a source document and a character span)
holds for every build of the index; what the failure-mode rules need is gold as ids of the chunks
this trace saw. Each retrieved, reranked or supplied chunk carries its provenance in
``document.metadata`` (`ragtrace.semconv.PROVENANCE_SOURCE_ID`, ``PROVENANCE_START``,
``PROVENANCE_END``); a chunk is gold when it overlaps a gold span of the same source document.

What overlap counts: chunk [cs, ce) and span [gs, ge) of the same source overlap when they share at
least ``min_share`` (0.5) of the *shorter* of the two:

    |[cs, ce) ∩ [gs, ge)| >= min_share · min(ce − cs, ge − gs)

so a chunk that holds the evidence sentence counts, a small chunk lying mostly inside a long
evidence passage counts, and a chunk that only grazes the evidence by a few characters at its edge
does not. A span that no chunk of the trace overlaps stays in the gold set as an id that is never
retrieved (``gold-span:SOURCE[START:END]``): the evidence exists and the pipeline did not find it,
which is a retrieval gap and a recall of 0 for that span, not an unknown.

When no document of the trace carries provenance the spans cannot be placed, and `resolve` returns
None: the audit then falls back to the next gold source (chunk-id qrels, the relevance labeller),
rather than calling every query a retrieval gap.
"""

from __future__ import annotations

# The placement itself lives in the store, so the trace listings (`read_traces`' gold_evidence) and the
# audit place spans on chunks the same way.
from ragtrace_store.evidence_gold import (
    MIN_SHARE,
    Provenance,
    ResolvedGold,
    overlap,
    phantom_id,
    provenance,
    resolve,
)

__all__ = ["MIN_SHARE", "POLICY", "Provenance", "ResolvedGold", "overlap", "phantom_id", "provenance", "resolve"]

#: how the audit's manifest names this resolution (part of the gold policy)
POLICY = f"evidence-spans(overlap>={MIN_SHARE:g}*shorter)"
