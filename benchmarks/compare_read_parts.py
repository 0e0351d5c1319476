"""Where compare's read of two releases spends its time, beside its floor: the parts that exactness
and `LabelSummary` objects cost, and the least the path could take with them.

`benchmarks/store_scale.py` measures compare's read (``releases_manifests`` then ``load_pair``) against a
bare SQL floor that reads the paired labels without deduplicating versions and hands Python tuples. This
takes the same path apart on a store that script kept (``--keep``): the manifests read; the pairing
query in the engine alone (``FORMAT Null``) and with its rows converted by the driver; Python's part
(the rest of the path: checking each row and building its `LabelSummary`); and, for scale, building the
same `LabelSummary` objects from those rows with no check at all (the least any reader returning them
pays). The sum of the manifests, the pairing query with its rows and that least Python is a floor for
any exact read that returns `LabelSummary` objects; its ratio to the bare floor says how near 2x that
read can come without giving up exactness or the objects. Best of ``--runs`` each, alternated.

    .venv/bin/python benchmarks/compare_read_parts.py DIR/10000000 [--runs 9]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_scale import TENANT, _floor_compare  # the same floor as store_scale's


class _Capturing:
    """The store, remembering the last query `load_pair` sent (to replay it alone)."""

    def __init__(self, store: Any) -> None:
        self._store, self.sql, self.params = store, "", {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        self.sql, self.params = sql, parameters or {}
        return self._store.query_rows(sql, parameters)


def main() -> None:
    from ragtrace_evaluator.compare.records import load_pair, releases_manifests
    from ragtrace_store import open_store
    from ragtrace_store.label_summary import LabelSummary, checked_summary
    from ragtrace_store.release_labels import _SUMMARY_OF as summary_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a store kept by benchmarks/store_scale.py --keep, e.g. DIR/10000000")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    if not (args.store / "built.json").exists():
        sys.exit(f"{args.store}: not a store built by benchmarks/store_scale.py --keep (no built.json)")
    st = open_store(str(args.store), migrate=False)
    lab = st.table("labels")
    found = releases_manifests(st, ["v4", "v5"], tenant=TENANT)
    pair = (("v4", found["v4"][0]), ("v5", found["v5"][0]))
    cap = _Capturing(st)
    load_pair(cap, *pair, tenant=TENANT)
    sql, params = cap.sql, cap.params
    rows = st.query_rows(sql, params)
    paired = [r for r in rows if r[1]]
    # the same query with its rows thrown away by the engine (before any SETTINGS clause)
    null_sql = sql.replace(" SETTINGS ", " FORMAT Null SETTINGS ", 1) if " SETTINGS " in sql else sql + " FORMAT Null"

    def least_python() -> list[LabelSummary]:
        # the same values as the product's labels, set as `checked_summary` sets them, with no check and
        # no conversion but the metrics' parse; a paired row holds a value per summary field from r[2],
        # made a dict as the product does
        out = []
        for r in paired:
            summary = summary_of(r[2:])
            metrics = summary["metrics"]
            summary.update(verdict=summary["verdict"] or None, refusal_justified=None,
                           metrics=orjson.loads(metrics) if metrics else {})
            out.append(checked_summary(summary))
        return out

    # (key, what is printed, what is timed)
    parts: list[tuple[str, str, Callable[[], Any]]] = [
        ("pair", "load_pair (the path after its manifests read)", lambda: load_pair(st, *pair, tenant=TENANT)),
        ("manifests", "its manifests read", lambda: releases_manifests(st, ["v4", "v5"], tenant=TENANT)),
        ("engine", "load_pair's query, in the engine (FORMAT Null)", lambda: st.command(null_sql, params)),
        ("driver", "load_pair's query, rows converted by the driver", lambda: st.query_rows(sql, params)),
        ("least", "the least Python: LabelSummary objects with no checks", least_python),
        ("floor", "the floor (store_scale's)", lambda: _floor_compare(st.query_rows, lab)),
    ]
    best = {key: float("inf") for key, _name, _fn in parts}
    for _ in range(args.runs):
        for key, _name, fn in parts:
            t0 = time.perf_counter()
            fn()
            best[key] = min(best[key], time.perf_counter() - t0)
    ms = {k: v * 1000 for k, v in best.items()}
    path = ms["pair"] + ms["manifests"]
    least = ms["manifests"] + ms["driver"] + ms["least"]
    print(f"{len(paired)} paired labels ({args.store}); best of {args.runs}, ms")
    for key, name, _fn in parts:
        print(f"  {name:<52} {ms[key]:8.1f}")
    print(f"  {'Python in the path (the rest of it)':<52} {ms['pair'] - ms['driver']:8.1f}")
    print(f"path / floor: {path / ms['floor']:.2f}; least exact read with LabelSummary objects / floor: "
          f"{least / ms['floor']:.2f} ({least:.1f} ms)")
    st.close()


if __name__ == "__main__":
    main()
