"""What the `ragtrace` subcommands share: the `--store` help text and opening a store with a
message that says what to do when it cannot be used.

Exit codes, the same in every command: 0 success, 1 the command's own work failed, 2 a usage error
or a store that cannot be used (`EXIT_STORE`: it does not exist, another process owns it, it cannot
be reached, or its schema is missing or older than this version).

Only `ragtrace store migrate` and `ragtrace serve` (at start, with its --cluster variant) change
the schema. Every other command opens the store with `open_reader`, which never migrates: it
refuses a store whose schema is not up to date and says how to migrate it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragtrace_store import (
    DEFAULT_TENANT,
    Store,
    StoreError,
    StoreLockedError,
    default_store_path,
    is_server_url,
    open_store,
)
from ragtrace_store.clock import parse_duration

STORE_HELP = ("a directory (embedded chDB) or http(s)://user:password@host:8123/database; "
              f"default $RAGTRACE_STORE or {default_store_path()}")

#: exit status of every command whose store cannot be used
EXIT_STORE = 2

#: the tenant's collector token of `--server` (`traces`, `audit`, `reviewers`) when --token is not given
ENV_TENANT_TOKEN = "RAGTRACE_TOKEN"

#: the help of `--since` / `--until` (parsed by `ragtrace_store.clock.parse_time_bound`)
TIME_HELP = "ISO time (naive = UTC) or an age before now: 15m, 6h, 2d (also written -1h)"

#: flags whose value may be an age with a leading minus (`parse_time_bound` accepts it)
_AGE_FLAGS = ("--since", "--until")

#: commands that can go through a running `ragtrace serve` instead of opening its embedded store
_SERVER_MODE = ("traces", "audit", "review", "reviewers")


def open_or_report(store: str | None, *, migrate: bool, command: str, say: Callable[[str], None] | None = None,
                   locked: str | None = None, **kw: Any) -> Store | None:
    """The store, or None after saying why it cannot be opened (the caller exits with `EXIT_STORE`).
    ``say`` gets each line of the message (default: printed to stderr after ``ragtrace COMMAND:``).
    ``locked`` is said instead of the store's own advice when another process owns an embedded
    store, for a command that cannot go through the serving process as that advice suggests."""
    say = say or _stderr(command)
    try:
        return open_store(store, migrate=migrate, **kw)
    except StoreLockedError as exc:
        if locked is not None:
            say(locked)
            return None
        hint = ""
        if command in _SERVER_MODE:
            hint = (f"\n  To work while the collector runs: ragtrace {command} ... --server http://HOST:4318 "
                    "[--token TOKEN] (goes through the serving process).")
        say(f"{exc}{hint}")
        return None
    except StoreError as exc:
        say(str(exc))
        return None


def open_reader(store: str | None, *, command: str, say: Callable[[str], None] | None = None,
                locked: str | None = None, **kw: Any) -> Store | None:
    """The store for a command that reads it (or adds rows to it), never migrating it; None after
    saying why it cannot be used (the caller exits with `EXIT_STORE`).

    An embedded directory that does not exist is not created, and a store whose schema is missing
    or old is refused with the command that migrates it: a reader that migrated would apply the
    single-node schema to whatever it was pointed at, a cluster included.
    """
    say = say or _stderr(command)
    location = str(store) if store is not None else str(default_store_path())
    missing = missing_store(location)
    if missing:
        say(missing)
        return None
    opened = open_or_report(location, migrate=False, command=command, say=say, locked=locked, **kw)
    if opened is None:
        return None
    try:
        done = opened.applied_versions()
        pending = opened.pending_migrations()
    except Exception as exc:  # the driver's errors: an unreachable or refusing server
        say(f"cannot read the schema version of {opened.location}: {exc}")
        opened.close()
        return None
    if pending:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        state = "has no ragtrace schema" if not done else f"has an older schema (missing {names})"
        say(f"the store {opened.location} {state}. This command never changes the schema: run "
            f"`ragtrace store migrate --store {opened.location}` (on a ClickHouse cluster add `--variant "
            "cluster --cluster NAME`), or start `ragtrace serve` on it, then retry.")
        opened.close()
        return None
    return opened


def joined_ages(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--since -1h`` given as ``--since=-1h``. argparse takes a value that starts with
    a minus and is not a plain number for another option, so it would refuse the documented form
    ("expected one argument")."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in _AGE_FLAGS and i + 1 < len(argv) and _is_minus_age(argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _is_minus_age(text: str) -> bool:
    """An age written with a leading minus ("-1h"), in the units `parse_duration` reads."""
    if not text.startswith("-"):
        return False
    try:
        parse_duration(text[1:])
    except ValueError:
        return False
    return True


#: characters a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1
#: controls, and the bidirectional overrides that reorder what is shown after them
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to write to a terminal. Trace content is untrusted (any service that can send
    spans writes it), and an escape sequence in a query or passage would clear the screen, retitle
    the window or hide what is printed after it: each such character is written as its escape
    (``\\x1b``, ``\\u202e``), so it is seen instead of obeyed."""
    return _TERMINAL_CONTROLS.sub(
        lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100 else f"\\u{ord(m.group(0)):04x}", text)


def decide_tenant(parser: argparse.ArgumentParser, args: argparse.Namespace,
                  token: str = f"--token or ${ENV_TENANT_TOKEN}") -> None:
    """Set ``args.tenant`` (parsed with default None): --tenant for direct store access, else
    `DEFAULT_TENANT`. Through --server the token (``token`` says where it comes from) selects the
    tenant, so a --tenant there is a usage error rather than dropped unsaid."""
    if args.server and args.tenant is not None:
        parser.error(f"--tenant {args.tenant} applies to direct store access (--store); through --server the "
                     f"token ({token}) selects the tenant")
    args.tenant = args.tenant or DEFAULT_TENANT


def tenant_arg(text: str) -> str:
    """The argparse type of every ``--tenant``: a blank one would write rows no token ever reads
    (the collector's tenants are never blank) and read none."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give a tenant name without surrounding spaces (default: "
                                         f"{DEFAULT_TENANT})")
    return text


def server_arg(text: str) -> str:
    """The argparse type of every ``--server``: a URL that could never reach a collector is a usage
    error (exit 2) before anything is read, not a connection failure (exit 1) after."""
    from ragtrace_cli.remote import collector_url_problem  # httpx loads only for a command given --server

    problem = collector_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def missing_store(location: str) -> str | None:
    """What to say when ``location`` names an embedded store directory that does not exist (None
    otherwise): a command that only reads must not create one at a mistyped path."""
    if is_server_url(location) or "://" in location or Path(location).expanduser().is_dir():
        return None  # a URL is checked by open_store, which refuses any scheme but http(s)
    return (f"there is no store at {location}; give --store (or $RAGTRACE_STORE), or create one with "
            f"`ragtrace store migrate --store {location}` or `ragtrace serve --store {location}`")


def _stderr(command: str) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(f"ragtrace {command}: {message}", file=sys.stderr)

    return say
