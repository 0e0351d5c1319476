"""Each field of the label record is declared once (`ragtrace_store.label_fields.key`), and every form of
the record follows the declarations: the JSON writer and parser, the ``labels`` table's columns on the
real engine, the rows written and read, and the summary a comparison reads from the store. So a field
added to the record is its declaration, plus a migration when a column copies it; a field added beside
the declarations (the old way) is refused when the module is imported.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import ragtrace_store.labels
from ragtrace_store import (
    LABEL_COLUMNS,
    ClaimRecord,
    GenerationRecord,
    LabelError,
    LabelRecord,
    LabelSummary,
    RankingRecord,
    RetrievalRecord,
    Store,
    label_row,
    read_labels,
    write_labels,
)
from ragtrace_store.label_fields import columns_of, declared, key, text
from ragtrace_store.label_summary import SUMMARY_PATHS
from ragtrace_store.label_table import RECORD_COLUMNS, column_copying
from ragtrace_store.release_labels import paired_labels, release_labels

LINES = [line for line in (Path(__file__).parent / "data" / "audit-per-trace.jsonl").read_text(
    encoding="utf-8").splitlines() if line]
CLASSES = (LabelRecord, RetrievalRecord, RankingRecord, GenerationRecord, ClaimRecord)


def _records() -> list[LabelRecord]:
    return [LabelRecord.from_json(json.loads(line)) for line in LINES]


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = None if obj is None else obj[part]
    return obj


def _insertable_columns(store: Store) -> list[str]:
    """The labels table's columns a row writes, as the engine has them (not MATERIALIZED or ALIAS)."""
    return [str(r[0]) for r in store.query_rows(
        "SELECT name FROM system.columns WHERE database = {d:String} AND table = 'labels' "
        "AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY position", {"d": store.database})]


# --- every field declared --------------------------------------------------------------------------------
def test_every_field_of_the_record_is_declared() -> None:
    for cls in CLASSES:
        assert [d.attr for d in declared(cls)] == [f.name for f in dataclasses.fields(cls) if f.name != "extra"]
    # the JSON keys, in the order the record has always been written in: the field names, but "pass"
    assert [d.json for d in declared(LabelRecord)] == [
        "trace_id", "query_id", "release", "service", "manifest_id", "failure_mode", "retrieval", "ranking",
        "generation", "metrics", "pass", "score", "score_basis", "confidence", "incomplete_reasons"]


def _labels_module_with(line: str, after: str) -> types.ModuleType:
    """`ragtrace_store.labels` with ``line`` added to its source after the line ``after``, imported
    afresh under another name."""
    source = Path(ragtrace_store.labels.__file__).read_text(encoding="utf-8")
    assert source.count(after + "\n") == 1
    name = f"labels_{uuid.uuid4().hex[:8]}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    try:
        exec(compile(source.replace(after + "\n", f"{after}\n{line}\n"), f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def test_a_field_added_beside_the_declarations_is_refused_at_import() -> None:
    """Adding a field the old way (a plain dataclass field, then the writer, the parser, the columns
    by hand) fails as soon as the module is imported, naming the field and what to do."""
    anchor = "    extra: Mapping[str, Any] = rest(default_factory=dict, hash=False, kw_only=True)"
    with pytest.raises(TypeError, match=r"LabelRecord\.reviewer_note is not declared: declare it with "
                                        r"ragtrace_store\.label_fields\.key\(check, \.\.\.\)"):
        _labels_module_with("    reviewer_note: str = ''", anchor)
    nested = "    best_distractor_rank: int | None = key(_rank)"
    with pytest.raises(TypeError, match=r"RankingRecord\.margin is not declared"):
        _labels_module_with("    margin: float = 0.0", nested)
    # the same line declared: the module imports, and its record writes and reads the field
    module = _labels_module_with("    reviewer_note: str = key(text, optional=True, default='', kw_only=True)",
                                 anchor)
    rec = module.LabelRecord.from_json({**json.loads(LINES[0]), "reviewer_note": "seen"})
    assert rec.reviewer_note == "seen" and list(rec.to_json())[-1] == "reviewer_note"


# --- the forms of the record follow the declarations -------------------------------------------------------
def test_the_writer_and_the_parser_follow_the_declarations() -> None:
    for rec in _records():
        obj = rec.to_json()
        # the declared keys in declaration order, the lifted gold flags just before their object,
        # incomplete_reasons only when there are some
        keys = [k for d in declared(LabelRecord) for k in (*d.lifted, d.json)
                if d.json != "incomplete_reasons" or rec.incomplete_reasons]
        assert list(obj) == keys
        for name, cls in (("retrieval", RetrievalRecord), ("ranking", RankingRecord), ("generation", GenerationRecord)):
            if obj[name] is not None:
                assert list(obj[name]) == [d.json for d in declared(cls)]
        assert LabelRecord.from_json(obj) == rec
    # the parser requires exactly the declared required keys, in their order, and names the optional ones
    with pytest.raises(LabelError) as err:
        LabelRecord.from_json({})
    required = [d.json for d in declared(LabelRecord) if not d.optional]
    assert str(err.value) == (
        f"label record: missing {', '.join(repr(k) for k in required)}; the label record's top level has "
        f"{', '.join(required)} (optional: gold_in_pool, gold_in_context, score_basis, incomplete_reasons)")
    with pytest.raises(LabelError, match=r"missing 'generation\.verdict', 'generation\.groundedness', "
                                         r"'generation\.abstained', 'generation\.refusal_justified', "
                                         r"'generation\.claims'; .* \(optional: grounded_elsewhere, confidence\)"):
        LabelRecord.from_json({**json.loads(LINES[0]), "generation": {}})


def test_the_table_columns_are_the_declared_ones_on_the_engine(chdb_store: Any) -> None:
    """A column a migration adds without a declaration (or a declaration without its column) fails here."""
    declared_columns = ("tenant", *(c.name for c in columns_of(LabelRecord)), "detail", "trace_time", "labelled_at")
    assert declared_columns == LABEL_COLUMNS
    assert sorted(_insertable_columns(chdb_store)) == sorted(LABEL_COLUMNS)
    # every row holds, in each column, the record's value at the column's path (or its empty value)
    t = datetime(2026, 11, 1, tzinfo=UTC)
    for rec in _records():
        row = dict(zip(LABEL_COLUMNS, label_row(rec, tenant="t", trace_time=t, labelled_at=t), strict=True))
        obj = rec.to_json()
        for column in RECORD_COLUMNS:
            want = _at(obj, column.path)
            assert row[column.name] == (column.empty if want is None else want), column.name
        assert row["detail"] == rec.to_json_line()


def test_the_summary_reads_what_its_fields_declare(chdb_store: Any) -> None:
    """`LabelSummary.from_record` and the store's reads for comparisons (a column where one copies the
    path, else that part of ``detail``) give each summary field the record's value at its path."""
    assert column_copying(("ranking", "ok")) == "ranking_ok" and column_copying(("metrics",)) is None
    records = _records()
    for rec in records:
        summary = LabelSummary.from_record(rec)
        obj = rec.to_json()
        for name, path in SUMMARY_PATHS.items():
            want = _at(obj, path)
            if name == "metrics":
                want = {k: None if v is None else float(v) for k, v in want.items()}
            assert getattr(summary, name) == want, name
    tenant = f"decl-{uuid.uuid4().hex[:8]}"
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    # the golden file's two manifests, as two releases labelled by each
    by_manifest: dict[str, list[LabelRecord]] = {}
    for i, rec in enumerate(records):
        copy = dataclasses.replace(rec, release="r2", trace_id=f"{rec.trace_id}-r2", query_id=f"q{i % 7}")
        by_manifest.setdefault(rec.manifest_id, []).extend(
            [dataclasses.replace(rec, query_id=f"q{i % 7}"), copy])
    for i, (manifest, recs) in enumerate(by_manifest.items()):
        write_labels(chdb_store, recs, tenant=tenant, labelled_at=t0 + timedelta(hours=i),
                     trace_times={r.trace_id: t0 + timedelta(seconds=j) for j, r in enumerate(recs)})
        for release in ("r1", "r2"):
            ((got_manifest, stored),) = release_labels(chdb_store, release, tenant=tenant, manifest_id=manifest)
            assert got_manifest == manifest
            assert stored == [LabelSummary.from_record(r) for r in recs if r.release == release]
        a, b = paired_labels(chdb_store, ("r1", manifest), ("r2", manifest), tenant=tenant)
        assert a.labels == tuple(LabelSummary.from_record(r) for r in recs if r.release == "r1")
        assert b.labels == tuple(LabelSummary.from_record(r) for r in recs if r.release == "r2")


# --- a field added: its declaration, and a migration for its column -----------------------------------------
@dataclasses.dataclass(frozen=True)
class NotedRecord(LabelRecord):
    """The record with one more field, declared as the record's own are, and copied by a column."""

    reviewer_note: str = key(text, optional=True, default="", kw_only=True, column="reviewer_note")


def _noted(rec: LabelRecord, note: str) -> NotedRecord:
    return NotedRecord(**{f.name: getattr(rec, f.name) for f in dataclasses.fields(LabelRecord)}, reviewer_note=note)


def test_a_new_field_is_its_declaration_and_a_migration(chdb_store: Any) -> None:
    rec = _noted(_records()[0], "checked by hand")
    # JSON: written after the record's keys (before unknown ones), read back, checked
    obj = rec.to_json()
    assert list(obj)[-1] == "reviewer_note" and obj["reviewer_note"] == "checked by hand"
    assert NotedRecord.from_json(obj) == rec
    with pytest.raises(LabelError, match=r"^label record: 'reviewer_note' must be a string, got 3$"):
        NotedRecord.from_json({**obj, "reviewer_note": 3})
    assert NotedRecord.from_json({k: v for k, v in obj.items() if k != "reviewer_note"}).reviewer_note == ""
    # the record of today reads it as a key it does not know, and keeps it
    assert LabelRecord.from_json(obj).extra == {"reviewer_note": "checked by hand"}
    # the table: a copy of the labels table in a database of this test's own, the migration adding
    # the column; the rows written and read carry it with no other change
    db = f"decl_{uuid.uuid4().hex[:8]}"
    store = Store(chdb_store.client, db, location=chdb_store.location, embedded=True)
    store.command(f"CREATE DATABASE {db}")
    try:
        store.command(f"CREATE TABLE {db}.labels AS {chdb_store.table('labels')}")
        store.command(f"ALTER TABLE {db}.labels ADD COLUMN IF NOT EXISTS reviewer_note String DEFAULT ''")
        noted_columns = ("tenant", *(c.name for c in columns_of(NotedRecord)), "detail", "trace_time", "labelled_at")
        assert noted_columns[-4:] == ("reviewer_note", "detail", "trace_time", "labelled_at")
        assert sorted(_insertable_columns(store)) == sorted(noted_columns)
        other = _noted(_records()[1], "")
        t = datetime(2026, 11, 1, tzinfo=UTC)
        write_labels(store, [rec, other], tenant="t", trace_times={rec.trace_id: t, other.trace_id: t},
                     labelled_at=t)
        assert sorted(store.query_rows(f"SELECT trace_id, reviewer_note FROM {db}.labels")) == sorted(
            [(rec.trace_id, "checked by hand"), (other.trace_id, "")])
        back = read_labels(store, tenant="t", record_class=NotedRecord)
        assert sorted(back, key=lambda r: r.trace_id) == sorted([rec, other], key=lambda r: r.trace_id)
        # the column stands for its key, as every column that copies a top-level key does: a newer row
        # whose column says otherwise than its detail reads as the column says
        row = list(label_row(rec, tenant="t", trace_time=t, labelled_at=t + timedelta(seconds=1)))
        row[noted_columns.index("reviewer_note")] = "from the column"
        store.insert("labels", [tuple(row)], noted_columns)
        (again,) = read_labels(store, tenant="t", record_class=NotedRecord, trace_ids=[rec.trace_id])
        assert again == dataclasses.replace(rec, reviewer_note="from the column")
    finally:
        store.command(f"DROP DATABASE IF EXISTS {db}")
