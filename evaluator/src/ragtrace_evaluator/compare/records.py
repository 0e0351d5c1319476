"""The per-query labels that `ragtrace compare` reads: from JSON Lines files or from the store.

Both sources carry the per-trace record of the shared contract, `ragtrace_store.LabelRecord`
(what `ragtrace audit --per-trace` writes and what the `labels` table holds), which a comparison
reads as its summary, `ragtrace_store.LabelSummary`: a record with a ``failure_mode`` is read whole,
by `LabelRecord.from_json`; records of other harnesses need only ``query_id``, ``gold_in_context``
and ``pass``, every other field optional (`LabelSummary.from_json`), and the comparison leaves out
what no record has. The store's labels are the store's answers (`ragtrace_store.release_labels`,
`ragtrace_store.paired_labels`, `ragtrace_store.releases_manifests`); this module makes label sets of
them.

A release's labels must come from one labeller manifest: labels from different manifests measure
different things, so mixing them is refused (`MixedManifestError`) unless the caller forces it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from ragtrace_store import (
    FailureMode,
    LabelError,
    LabelSummary,
    json_line_values,
    paired_labels,
    release_labels,
)
from ragtrace_store import releases_manifests as stored_releases_manifests

__all__ = [
    "INCOMPLETE",
    "CompareError",
    "LabelSet",
    "MixedManifestError",
    "check_manifests",
    "label_set",
    "load_jsonl",
    "load_pair",
    "load_release",
    "parse_record",
    "release_manifests",
    "releases_manifests",
]


#: the outcome of a trace that lost attributes or a stage: its own outcome, never a failure mode
INCOMPLETE: Final = FailureMode.INCOMPLETE.value


class CompareError(Exception):
    """Base of every `ragtrace compare` error; the message says what to fix."""


class MixedManifestError(CompareError):
    """Labels of more than one labeller manifest would be compared."""


@dataclass(frozen=True)
class LabelSet:
    """The labels of one side of a comparison, one per query id (duplicates collapsed, counted)."""

    name: str
    source: str  # "file" | "store"
    labels: tuple[LabelSummary, ...]
    manifest_ids: tuple[str, ...] = ()
    #: records dropped because a later record had the same query id (the later one is kept)
    n_duplicates: int = 0
    #: records that had no query id and so cannot be paired
    no_query_id: tuple[str, ...] = ()
    #: query ids of this side whose labels were not read because the other side has none of them
    #: (`load_pair`: the pairing done by the engine); `labels` then holds the paired ones only
    unpaired: tuple[str, ...] = ()

    @property
    def n_queries(self) -> int:
        """The distinct query ids of this side, read or not."""
        return len(self.labels) + len(self.unpaired)


def parse_record(rec: Mapping[str, Any], where: str = "record") -> LabelSummary:
    """Validate one per-trace record (`LabelSummary.from_json`); ``where`` (e.g. ``file.jsonl:12``)
    prefixes every error."""
    try:
        return LabelSummary.from_json(rec, where)
    except LabelError as exc:
        raise CompareError(str(exc)) from exc


def label_set(name: str, source: str, labels: Iterable[LabelSummary]) -> LabelSet:
    """Collapse to one label per query id (the last one wins) and set aside records without an id."""
    by_query: dict[str, LabelSummary] = {}
    no_id: list[str] = []
    dups = 0
    manifests: set[str] = set()
    for lab in labels:
        if lab.manifest_id:
            manifests.add(lab.manifest_id)
        if not lab.query_id:
            no_id.append(lab.trace_id)
            continue
        if lab.query_id in by_query:
            dups += 1
            del by_query[lab.query_id]  # keep insertion order = order of the kept record
        by_query[lab.query_id] = lab
    return LabelSet(name=name, source=source, labels=tuple(by_query.values()),
                    manifest_ids=tuple(sorted(manifests)), n_duplicates=dups, no_query_id=tuple(no_id))


def load_jsonl(path: str | Path, name: str | None = None) -> LabelSet:
    """Per-trace records from a JSON Lines file (blank lines allowed; errors start ``PATH:N:``)."""
    p = Path(path)
    try:
        labels = [parse_record(rec, where) for where, rec in json_line_values(p, CompareError, _LINE_SHAPE)]
    except OSError as exc:
        raise CompareError(f"cannot read {p}: {exc.strerror or exc}") from exc
    if name is None:
        # Name the side by its release when the file holds one, so reports read "v1 (labels-v1.jsonl)".
        releases = {lab.release for lab in labels if lab.release}
        name = f"{releases.pop()} ({p.name})" if len(releases) == 1 else str(p)
    return label_set(name, "file", labels)


#: what each line of a compared file must be (the end of a JSON Lines error)
_LINE_SHAPE = "expected one record per line (a JSON object with query_id, gold_in_context and pass at least)"


def check_manifests(baseline: LabelSet, candidate: LabelSet, *, force: bool = False) -> list[str]:
    """Refuse labels of different manifests unless ``force``; returns the warnings when forced."""
    ids = sorted(set(baseline.manifest_ids) | set(candidate.manifest_ids))
    if len(ids) <= 1:
        return []
    detail = (f"baseline {baseline.name!r} has {list(baseline.manifest_ids) or 'no manifest'}, "
              f"candidate {candidate.name!r} has {list(candidate.manifest_ids) or 'no manifest'}")
    if not force:
        raise MixedManifestError(
            f"labels from {len(ids)} labeller manifests ({detail}). Labels of different labellers, "
            "thresholds or code measure different things: relabel both releases with one manifest "
            "(`ragtrace audit`), choose one with --manifest ID, or pass --force to compare anyway.")
    return [f"comparing labels of different manifests because --force was given: {detail}"]


def load_release(store: Any, release: str, *, tenant: str = "default", service: str | None = None,
                 manifest_id: str | None = None) -> list[LabelSet]:
    """The labels of one release in the store, one `LabelSet` per manifest found (newest first),
    as `ragtrace_store.release_labels` reads them (the newest version of each label). The caller
    chooses the manifest (see `ragtrace_cli.commands.compare`); an empty list means nothing is labelled.
    """
    try:
        per_manifest = release_labels(store, release, tenant=tenant, service=service, manifest_id=manifest_id)
    except LabelError as exc:
        raise CompareError(str(exc)) from exc
    return [label_set(release, "store", labels) for _manifest, labels in per_manifest]


def release_manifests(store: Any, release: str, *, tenant: str = "default", service: str | None = None,
                      manifest_id: str | None = None) -> list[str]:
    """The labeller manifests with labels of ``release`` (newest first, as `load_release` orders its
    label sets), read without the labels."""
    return releases_manifests(store, [release], tenant=tenant, service=service, manifest_id=manifest_id)[release]


def releases_manifests(store: Any, releases: Sequence[str], *, tenant: str = "default", service: str | None = None,
                       manifest_id: str | None = None) -> dict[str, list[str]]:
    """`release_manifests` of each of ``releases``, in one read (`ragtrace_store.releases_manifests`)."""
    return stored_releases_manifests(store, releases, tenant=tenant, service=service, manifest_id=manifest_id)


def load_pair(store: Any, baseline: tuple[str, str], candidate: tuple[str, str], *, tenant: str = "default",
              service: str | None = None) -> tuple[LabelSet, LabelSet]:
    """Two sides of a comparison, each a (release, manifest id), paired by the engine
    (`ragtrace_store.paired_labels`): only the labels whose query id the other side also has are read
    (`LabelSet.unpaired` names the others), so a comparison holds what its paired queries cost, not
    every label of both releases. The same `pair` and comparison as `load_release` on each side
    (tests/compare/test_compare_store.py)."""
    if baseline == candidate:  # a release against itself: every query pairs, one read
        (ls,) = load_release(store, baseline[0], tenant=tenant, service=service, manifest_id=baseline[1])
        return ls, ls
    try:
        sides = paired_labels(store, baseline, candidate, tenant=tenant, service=service)
    except LabelError as exc:
        raise CompareError(str(exc)) from exc
    out = []
    for side in sides:
        ls = label_set(side.release, "store", side.labels)
        out.append(replace(ls, manifest_ids=(side.manifest_id,),
                           n_duplicates=ls.n_duplicates + side.unpaired_duplicates, no_query_id=side.no_query_id,
                           unpaired=side.unpaired))
    return out[0], out[1]
