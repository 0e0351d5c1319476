"""The `ragtrace` command: one console script, subcommands loaded on demand.

The SDK distribution owns the entry point but none of the heavy code: each subcommand lives in
the package of its extra and is imported only when it runs, so `pip install ragtrace` stays light
and a subcommand whose extra is missing says exactly which install adds it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    target: str  # "module:function"; the function takes argv (list[str]) and returns an exit code
    extra: str
    summary: str


COMMANDS: dict[str, Command] = {
    "serve": Command("ragtrace_cli.commands.serve:serve_main", "collector",
                     "run the OTLP/HTTP collector and review UI"),
    "traces": Command("ragtrace_cli.commands.traces:traces_main", "collector", "list or show stored traces"),
    "store": Command("ragtrace_cli.commands.store:store_main", "collector",
                     "store administration: migrate, status, retention"),
    "reviewers": Command("ragtrace_cli.commands.review:reviewers_main", "collector",
                         "add, list, disable or enable human reviewers"),
    "review": Command("ragtrace_cli.commands.review:review_main", "collector",
                      "review queues: enqueue, status, agreement, export"),
    "audit": Command("ragtrace_cli.commands.audit:audit_main", "evaluator",
                     "label sampled traces with their failing boundary"),
    "labels": Command("ragtrace_cli.commands.audit:labels_main", "evaluator",
                      "import gold labels: TREC qrels, evidence spans, reference answers"),
    "metrics": Command("ragtrace_cli.commands.metrics:metrics_main", "evaluator",
                       "trec_eval-compatible retrieval metrics on qrels + run files"),
    "compare": Command("ragtrace_cli.commands.compare:compare_main", "evaluator",
                       "compare two releases with paired statistics and gates"),
    "anchor": Command("ragtrace_cli.commands.anchor:anchor_main", "collector",
                      "pin the release or time window periodic audits judge drift against"),
    "demo": Command("ragtrace_examples.demo:demo_main", "examples",
                    "run the end-to-end demo on the embedded store"),
}

# What each extra must make importable; checked before a subcommand is imported, so a missing
# extra is reported as such rather than as a traceback from deep inside.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "collector": ("fastapi", "uvicorn", "clickhouse_connect", "jinja2", "rich", "opentelemetry.proto"),
    "evaluator": ("fastapi", "clickhouse_connect", "numpy", "scipy", "torch", "transformers", "matplotlib"),
    "examples": ("fastapi", "clickhouse_connect", "numpy", "torch", "bm25s"),
}


def _missing_module(extra: str) -> str | None:
    for name in EXTRA_MODULES[extra]:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: ragtrace COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {cmd.summary}" for name, cmd in COMMANDS.items()]
    lines += ["", "Run `ragtrace COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] == "--version":
        from ragtrace import __version__

        print(f"ragtrace {__version__}")
        return 0
    name, rest = args[0], args[1:]
    cmd = COMMANDS.get(name)
    if cmd is None:
        print(f"ragtrace: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    missing = _missing_module(cmd.extra)
    if missing is not None:
        print(
            f"ragtrace {name}: needs the '{cmd.extra}' extra ({missing} is not installed).\n"
            f"Install it with:  pip install 'ragtrace[{cmd.extra}]'",
            file=sys.stderr,
        )
        return 2
    # Each command reports a store it cannot reach in its own words; without this the driver's
    # "Unexpected Http Driver Exception" warning reaches stderr too (logging's last-resort handler,
    # as nothing is configured). `ragtrace serve` configures logging, so its log keeps the warning.
    logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
    module_name, func_name = cmd.target.split(":")
    module = importlib.import_module(module_name)
    try:
        result: int = getattr(module, func_name)(rest)
    except BrokenPipeError:
        # the reader went away (`ragtrace traces --json | head`): stop quietly, and point stdout at
        # /dev/null so the interpreter's final flush does not raise the same error again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a process ended by SIGPIPE
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
