"""Labels back where teams look: every label an audit writes, sent over OTLP/HTTP as an OpenTelemetry
GenAI evaluation event (``gen_ai.evaluation.result``) on the trace and span it judges
(`ragtrace serve --export-labels URL`; docs/production-loop.md)."""

from ragtrace_evaluator.label_export.events import EVALUATION_NAMES, EvaluationEvent, evaluation_events
from ragtrace_evaluator.label_export.exporter import DROP_REASONS, LabelExporter, LabelExportError, logs_endpoint

__all__ = [
    "DROP_REASONS",
    "EVALUATION_NAMES",
    "EvaluationEvent",
    "LabelExportError",
    "LabelExporter",
    "evaluation_events",
    "logs_endpoint",
]
