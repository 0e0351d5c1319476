"""The ragtrace store: ClickHouse schema and migrations, the one client factory, the read model and
the labels contract. Everything above it (ingest, evaluator, review, the CLI) reads and writes
through it, and imports it by this package's public names.

A store is a directory (embedded chDB, the default) or a ClickHouse server URL; `open_store`
connects to either and applies pending migrations.
"""

from ragtrace_store.client import (
    DEFAULT_DATABASE,
    ENV_STORE,
    Store,
    arrow_table,
    default_store_path,
    is_server_url,
    open_store,
)
from ragtrace_store.clock import as_utc, parse_duration, parse_time_bound, utc_now
from ragtrace_store.errors import StoreError, StoreLockedError, not_utf8
from ragtrace_store.evidence_gold import GoldEvidence
from ragtrace_store.filters import TraceFilter
from ragtrace_store.gold_spans import GoldSpan, GoldSpanError, read_gold_spans, read_span_lines, write_gold_spans
from ragtrace_store.json_lines import json_line_values
from ragtrace_store.label_summary import LabelSummary
from ragtrace_store.label_table import LABEL_COLUMNS, label_row, read_labels, write_labels
from ragtrace_store.labels import (
    CLAIM_VERDICTS,
    FAILURE_MODES,
    GENERATION_VERDICTS,
    GOLD_SOURCES,
    METRIC_NAMES,
    OUTCOMES,
    SCORE_BASES,
    ClaimRecord,
    ClaimVerdict,
    FailureMode,
    GenerationRecord,
    GenerationVerdict,
    GoldSource,
    LabelError,
    LabelRecord,
    RankingRecord,
    RetrievalRecord,
    ScoreBasis,
    read_label_lines,
    write_label_lines,
)
from ragtrace_store.listing import (
    EXACT_COUNT_ROWS,
    FilterValues,
    LabelFilter,
    TraceCount,
    TraceListing,
    count_listing,
    count_traces,
    filter_values,
)
from ragtrace_store.migrations import Migration, load_migrations
from ragtrace_store.paging import CursorError, decode_cursor, encode_cursor
from ragtrace_store.records import DEFAULT_TENANT, STAGES, DocumentRef, TraceRecord
from ragtrace_store.release_labels import PairedRelease, paired_labels, release_labels, releases_manifests
from ragtrace_store.sampling import SAMPLER_VERSION, SAMPLERS, Sample, SamplePlan, SamplingError, sample_traces

__all__ = [
    "CLAIM_VERDICTS",
    "DEFAULT_DATABASE",
    "DEFAULT_TENANT",
    "ENV_STORE",
    "EXACT_COUNT_ROWS",
    "FAILURE_MODES",
    "GENERATION_VERDICTS",
    "GOLD_SOURCES",
    "LABEL_COLUMNS",
    "METRIC_NAMES",
    "OUTCOMES",
    "SAMPLERS",
    "SAMPLER_VERSION",
    "SCORE_BASES",
    "STAGES",
    "ClaimRecord",
    "ClaimVerdict",
    "CursorError",
    "DocumentRef",
    "FailureMode",
    "FilterValues",
    "GenerationRecord",
    "GenerationVerdict",
    "GoldEvidence",
    "GoldSource",
    "GoldSpan",
    "GoldSpanError",
    "LabelError",
    "LabelFilter",
    "LabelRecord",
    "LabelSummary",
    "Migration",
    "PairedRelease",
    "RankingRecord",
    "RetrievalRecord",
    "Sample",
    "SamplePlan",
    "SamplingError",
    "ScoreBasis",
    "Store",
    "StoreError",
    "StoreLockedError",
    "TraceCount",
    "TraceFilter",
    "TraceListing",
    "TraceRecord",
    "arrow_table",
    "as_utc",
    "count_listing",
    "count_traces",
    "decode_cursor",
    "default_store_path",
    "encode_cursor",
    "filter_values",
    "is_server_url",
    "json_line_values",
    "label_row",
    "load_migrations",
    "not_utf8",
    "open_store",
    "paired_labels",
    "parse_duration",
    "parse_time_bound",
    "read_gold_spans",
    "read_label_lines",
    "read_labels",
    "read_span_lines",
    "release_labels",
    "releases_manifests",
    "sample_traces",
    "utc_now",
    "write_gold_spans",
    "write_label_lines",
    "write_labels",
]
