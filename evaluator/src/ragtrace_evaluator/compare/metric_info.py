"""Names of the compared statistics and what each one measures (its boundary and good direction)."""

from __future__ import annotations

import re

__all__ = ["CELL_PREFIX", "DECOMPOSITION_KEYS", "DECOMP_PREFIX", "MODE_PREFIX", "PAIR_PREFIX", "SLICE_PREFIX",
           "metric_info"]

#: the decomposition e2e = recall·P(pass | gold in C) + (1 − recall)·P(pass | no gold in C) and its terms
DECOMPOSITION_KEYS = ("recall", "p_pass_given_gold", "p_pass_without_gold", "e2e", "term_gold",
                      "term_without_gold")
DECOMP_PREFIX = "decomposition."
CELL_PREFIX = "cell:"
#: the share of queries with one failure mode (``mode:fabrication``), or abstained / incomplete
MODE_PREFIX = "mode:"
#: the surface × grounding pair, both on the queries where both are defined in both releases
PAIR_PREFIX = "pair:"
#: the mean end-to-end score of the queries that lost their gold in context (and of those that held)
SLICE_PREFIX = "slice:"
#: the boundary whose movers explain a change of each mode's rate
_MODE_BOUNDARY = {"retrieval_gap": "gold_in_context", "rank_inversion": "ranking", "under_use": "generation",
                  "fabrication": "generation", "ok": "e2e", "abstained": "generation", "incomplete": None}

_RETRIEVAL = re.compile(r"^(recall|precision|success|hit|gold_in_pool|gold_in_context)(_|$)")
_RANKING = re.compile(r"^(recip_rank|mrr|ndcg|map|ranking_ok)(_|$)")
_GENERATION = re.compile(r"^(groundedness|refusal|p_pass_)")


def metric_info(name: str) -> tuple[str | None, str | None]:
    """(boundary, direction) of a statistic: direction "higher"/"lower" is better, None = neither.

    The boundary names the movers report printed when a gate on the statistic trips; "e2e" means
    the end-to-end outcome, for which every boundary's movers are relevant.
    """
    if name.startswith(CELL_PREFIX):
        return None, None
    if name.startswith(MODE_PREFIX):
        mode = name.removeprefix(MODE_PREFIX)
        # An abstention may be right (no evidence in C), so its rate has no better direction.
        direction = {"ok": "higher", "abstained": None}.get(mode, "lower")
        return _MODE_BOUNDARY.get(mode), direction
    if name.startswith(SLICE_PREFIX):
        return "gold_in_context", "higher"
    name = name.removeprefix(PAIR_PREFIX)
    base = name.removeprefix(DECOMP_PREFIX)
    if base in ("recall", "term_gold"):
        return "gold_in_context", "higher"
    if base == "term_without_gold":
        return "generation", None
    if base == "abstention_rate":
        return "generation", None
    if base == "below_threshold":
        return "e2e", "lower"
    if base in ("pass_rate", "mean_score", "e2e", "token_f1"):
        return "e2e", "higher"
    if _RETRIEVAL.match(base):
        return "gold_in_context", "higher"
    if _RANKING.match(base):
        return "ranking", "higher"
    if _GENERATION.match(base):
        return "generation", "higher"
    return None, None
