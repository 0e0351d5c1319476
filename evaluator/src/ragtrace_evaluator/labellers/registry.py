"""Labellers by name: the registry `ragtrace audit --labeller NAME` and the benchmarks look them up in.

A name is ``KIND`` or ``KIND:ARGUMENT`` (``nli:/models/deberta``). The built-in kinds are registered
below and import their implementation only when asked for; a plug-in adds its own with
`register_grounding_labeller` / `register_relevance_labeller`. The protocols
(`ragtrace_evaluator.labellers.protocol`) know nothing of this module or of any implementation.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ragtrace_evaluator.labellers.protocol import GroundingLabeller, RelevanceLabeller

#: ``factory(argument)`` -> labeller; ``argument`` is what follows ``KIND:`` ("" when absent).
GroundingFactory = Callable[[str], GroundingLabeller]
RelevanceFactory = Callable[[str], RelevanceLabeller]

_GROUNDING: dict[str, GroundingFactory] = {}
_RELEVANCE: dict[str, RelevanceFactory] = {}

GROUNDING_NAMES = (
    "offline (default) | nli:builtin | nli:<model id or directory> | llm:<model>@<OpenAI-compatible base URL>"
)
RELEVANCE_NAMES = (
    "offline (default) | nli:builtin | nli:<model id or directory> | erag:<reader: smollm2, model id or directory>"
)


def register_grounding_labeller(kind: str, factory: GroundingFactory) -> None:
    """Make ``kind[:argument]`` a grounding labeller name; a later registration replaces an earlier one."""
    _check_kind(kind)
    _GROUNDING[kind] = factory


def register_relevance_labeller(kind: str, factory: RelevanceFactory) -> None:
    """Make ``kind[:argument]`` a relevance labeller name; a later registration replaces an earlier one."""
    _check_kind(kind)
    _RELEVANCE[kind] = factory


def _check_kind(kind: str) -> None:
    if not kind or not kind.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"labeller kind {kind!r}: use letters, digits, '-' and '_'")


def is_registered(name: str) -> bool:
    """Whether ``name``'s kind (before any ``:``) is a registered grounding or relevance labeller,
    without building one (no model loads): what a server checks its enabled names with at start."""
    kind = name.partition(":")[0]
    return kind in _GROUNDING or kind in _RELEVANCE


def make_grounding_labeller(name: str = "offline") -> GroundingLabeller:
    """A grounding labeller by name: ``offline`` (MiniLM + lexical checks), ``nli:<model>``, or
    ``llm:<model>@<base URL>`` (an OpenAI-compatible chat API; key from RAGTRACE_JUDGE_API_KEY)."""
    kind, _, arg = name.partition(":")
    factory = _GROUNDING.get(kind)
    if factory is None:
        raise ValueError(f"unknown grounding labeller {name!r}; expected {GROUNDING_NAMES}")
    return factory(arg)


def make_relevance_labeller(name: str = "offline") -> RelevanceLabeller:
    """A relevance labeller by name: ``offline``, ``nli:<model>`` or ``erag:<reader>``."""
    kind, _, arg = name.partition(":")
    factory = _RELEVANCE.get(kind)
    if factory is None:
        raise ValueError(f"unknown relevance labeller {name!r}; expected {RELEVANCE_NAMES}")
    return factory(arg)


# --- the built-in kinds (imported on first use: torch and transformers load only when needed) ----------
def _offline_grounding(arg: str) -> GroundingLabeller:
    if arg:
        raise ValueError(f"the offline grounding labeller takes no argument (got 'offline:{arg}')")
    from ragtrace_evaluator.labellers.offline import OfflineGroundingLabeller

    return OfflineGroundingLabeller()


def _nli_grounding(arg: str) -> GroundingLabeller:
    from ragtrace_evaluator.labellers.nli import BUILTIN, DEFAULT_NLI_MODEL, NLIGroundingLabeller

    if arg == BUILTIN:
        # the built-in model's thresholds were chosen on training data (training/calibrate_nli.py)
        from ragtrace_evaluator.labellers.nli_builtin import builtin_thresholds

        support, contradiction = builtin_thresholds()
        return NLIGroundingLabeller(BUILTIN, support_threshold=support, contradiction_threshold=contradiction)
    return NLIGroundingLabeller(arg or DEFAULT_NLI_MODEL)


def _llm_grounding(arg: str) -> GroundingLabeller:
    if "@" not in arg:
        raise ValueError(f"'llm:{arg}': use llm:<model>@<OpenAI-compatible base URL>")
    from ragtrace_evaluator.labellers.llm_judge import LLMJudge

    # The API key comes from the environment so it never lands in a manifest or a command line.
    model, _, base_url = arg.partition("@")
    return LLMJudge(base_url, model, api_key=os.environ.get("RAGTRACE_JUDGE_API_KEY"))


def _offline_relevance(arg: str) -> RelevanceLabeller:
    if arg:
        raise ValueError(f"the offline relevance labeller takes no argument (got 'offline:{arg}')")
    from ragtrace_evaluator.labellers.relevance import LexicalEmbeddingRelevance

    return LexicalEmbeddingRelevance()


def _nli_relevance(arg: str) -> RelevanceLabeller:
    from ragtrace_evaluator.labellers.nli import DEFAULT_NLI_MODEL
    from ragtrace_evaluator.labellers.relevance import NLIRelevance

    return NLIRelevance(arg or DEFAULT_NLI_MODEL)


def _erag_relevance(arg: str) -> RelevanceLabeller:
    from ragtrace_evaluator.labellers.erag import CausalLMReader, ERAGRelevance

    return ERAGRelevance(CausalLMReader(arg or "smollm2"))


register_grounding_labeller("offline", _offline_grounding)
register_grounding_labeller("nli", _nli_grounding)
register_grounding_labeller("llm", _llm_grounding)
register_relevance_labeller("offline", _offline_relevance)
register_relevance_labeller("nli", _nli_relevance)
register_relevance_labeller("erag", _erag_relevance)
