"""The label record's fields, each declared once, and the checks that read their values from JSON.

Every field of the label record's classes (`ragtrace_store.labels`: `LabelRecord` and the objects it
nests) is declared with `key`: the check that reads it from the record's JSON object, how it is
written there, whether the object may lack it, and the columns of the ``labels`` table that copy it.
What handles the record walks these declarations and names no field itself: the JSON writer
(`json_of`), the parser (`parsed_fields`), the table's columns, rows and reads
(`ragtrace_store.label_table`) and the summary a comparison reads (`ragtrace_store.label_summary`,
through `paths_reader`). Adding a field is its declaration, plus a migration when a column copies it.
A dataclass field declared neither with `key` nor with `rest` is refused (`TypeError`) when its
class's declarations are first read, which `ragtrace_store.labels` does at import: a field cannot be
added the old way, beside the declarations.

A class's JSON object holds its declared fields in declaration order (the order the record has always
been written in: a field with a default declared before required ones is ``kw_only``), then the keys
its `rest` field keeps.

Bad input raises `LabelError` (a `StoreError` and a `ValueError`) naming where, the field and what
to fix. ``None`` always means unknown or undefined, never False or 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NoReturn, TypeVar

from ragtrace_store.errors import StoreError

__all__ = [
    "Check",
    "Column",
    "Declared",
    "LabelError",
    "Nested",
    "check_keys",
    "columns_of",
    "declared",
    "enum",
    "fail",
    "flag",
    "json_of",
    "key",
    "known_keys",
    "metric",
    "number",
    "obj",
    "parsed_fields",
    "paths_reader",
    "rest",
    "text",
]


class LabelError(StoreError, ValueError):
    """A label record (a JSON object or a ``labels`` row) breaks the contract; the message names
    where, the field, and what to fix."""


_E = TypeVar("_E", bound=StrEnum)

#: a check: (the JSON value, where, the key's dotted name) -> the field's value, else `LabelError`
Check = Callable[[Any, str, str], Any]


# --- the checks --------------------------------------------------------------------------------------
def fail(where: str, message: str) -> NoReturn:
    raise LabelError(f"{where}: {message}")


def enum(cls: type[_E], value: Any, where: str, name: str) -> _E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value)
        except ValueError:
            pass
    # the names only for the message: this runs for every field of every label read
    fail(where, f"{name!r} is {value!r}, not one of {', '.join(m.value for m in cls)}")


def obj(value: Any, where: str, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        fail(where, f"{name!r} must be a JSON object, got {type(value).__name__}")
    return value


def check_keys(given: Mapping[str, Any], where: str, prefix: str, required: Sequence[str],
               optional: Sequence[str] = ()) -> None:
    missing = [k for k in required if k not in given]
    if missing:
        fail(where, f"missing {', '.join(repr(prefix + k) for k in missing)}; the label record's "
                    f"{prefix.rstrip('.') or 'top level'} has {', '.join(required)}"
                    f"{' (optional: ' + ', '.join(optional) + ')' if optional else ''}")
    unknown = sorted(set(given) - set(required) - set(optional))
    if unknown:
        fail(where, f"unknown {', '.join(repr(prefix + k) for k in unknown)} in {prefix.rstrip('.')!r}; it has "
                    f"{', '.join((*required, *optional))}")


def text(value: Any, where: str, name: str, *, required: bool = False) -> str:
    if not isinstance(value, str):
        fail(where, f"{name!r} must be a string, got {value!r}")
    if required and not value:
        fail(where, f"{name!r} must not be empty")
    return value


def flag(value: Any, where: str, name: str, *, nullable: bool) -> bool | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    fail(where, f"{name!r} must be true or false{' (or null when unknown)' if nullable else ''}, got {value!r}")


def number(value: Any, where: str, name: str, *, nullable: bool = True, unit: bool = False) -> float | None:
    if value is None and nullable:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        if unit and not 0.0 <= value <= 1.0:
            fail(where, f"{name!r} is in [0, 1], got {value!r}")
        return float(value)
    fail(where, f"{name!r} must be a finite number{' or null' if nullable else ''}, got {value!r}")


def metric(value: Any, where: str, name: str) -> float | bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return value
    fail(where, f"{name!r} must be a finite number, true/false or null, got {value!r}")


# --- the declarations ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """A column of the ``labels`` table that copies one value of the record's JSON object (for the
    engine's filters and counts; the whole object is the ``detail`` column)."""

    name: str
    #: where the value is in the record's JSON object, from its top level
    path: tuple[str, ...]
    #: what the column holds where the record has no value (a column that is not Nullable)
    empty: Any = None


@dataclass(frozen=True)
class Declared:
    """One declared field of a record class: its JSON key, and how it is read, written and stored."""

    #: the dataclass field
    attr: str
    #: the JSON key that holds it
    json: str
    check: Check
    #: the field's value as JSON (None: written as it is)
    dump: Callable[[Any], Any] | None
    #: a JSON object may lack it (the field's default stands)
    optional: bool
    #: left out of the JSON when empty (so that older records keep their bytes)
    omit_empty: bool
    #: keys of the object this field holds that the record also writes at its top level, just before
    #: this field's key, and reads from there first (the top level wins)
    lifted: tuple[str, ...]
    #: the ``labels`` columns that copy this field or parts of it
    columns: tuple[Column, ...]
    #: what a missing value must be, for the error (e.g. "true, false, or null when ... unknown")
    hint: str


@dataclass(frozen=True)
class Nested:
    """The check of a field holding a record object of ``cls`` (or null, when ``nullable``; or a list of
    them, when ``many`` says what one is, as in "a list of claim objects")."""

    cls: type
    nullable: bool = False
    many: str = ""

    def __call__(self, value: Any, where: str, name: str) -> Any:
        if value is None and self.nullable:
            return None
        parse = _schema(self.cls).parse
        if not self.many:
            return self.cls(**parse(obj(value, where, name), where, f"{name}."))
        if not isinstance(value, list):
            fail(where, f"{name!r} must be a list of {self.many} objects, got {type(value).__name__}")
        return tuple(self.cls(**parse(obj(item, where, f"{name}[{i}]"), where, f"{name}[{i}]."))
                     for i, item in enumerate(value))

    def dump(self, value: Any) -> Any:
        if value is None:
            return None
        return [json_of(v) for v in value] if self.many else json_of(value)


#: the metadata key of a declared field, and the marker of a `rest` field
_KEY: Final = "ragtrace_store.label_key"
_REST: Final = "ragtrace_store.label_rest"


def key(check: Check, *, json: str | None = None, dump: Callable[[Any], Any] | None = None, optional: bool = False,
        omit_empty: bool = False, lifted: tuple[str, ...] = (), column: str | None = None,
        columns: tuple[Column, ...] = (), hint: str = "", **field_args: Any) -> Any:
    """A field of a record class, declared.

    ``check`` reads it from JSON (a `Nested` for an object of another record class); ``dump`` writes
    it (the `Nested` check's own, else the value as it is); ``json`` is its key (the field's name when
    None); ``optional`` lets a JSON object lack it (its default stands); ``omit_empty`` leaves it out of
    the JSON when empty; ``lifted`` names keys of the object it holds that the record also has at its top
    level; ``column`` names the ``labels`` column that copies it as it is, ``columns`` those that copy
    parts of it (paths from the record's top level); ``hint`` says what a missing value must be.
    ``field_args`` go to `dataclasses.field` (``default``, ``default_factory``, ``kw_only``, ``hash``)."""
    if dump is None and isinstance(check, Nested):
        dump = check.dump
    if lifted and (optional or not isinstance(check, Nested)):
        raise TypeError("only keys of a required field holding an object (a Nested check) can be lifted")
    # the attribute and its JSON key are filled in from the field's name (`_schema`)
    spec = Declared("", json or "", check, dump, optional, omit_empty, tuple(lifted), tuple(columns), hint)
    return dataclasses.field(metadata={_KEY: (spec, column)}, **field_args)


def rest(**field_args: Any) -> Any:
    """The field of a record class that keeps the keys of its JSON object that no declaration names (a
    harness's own annotations), written back after the declared ones; a class without one refuses
    unknown keys. ``field_args`` go to `dataclasses.field`."""
    return dataclasses.field(metadata={_REST: True}, **field_args)


@dataclass(frozen=True)
class _Schema:
    """What a record class's declarations say, worked out once per class."""

    fields: tuple[Declared, ...]
    #: the `rest` field, if the class has one
    rest: str | None
    #: every key that a declaration names in the class's JSON object
    known: frozenset[str]
    #: for each JSON key, the attributes that hold its value (two for a lifted key) and its dump
    reading: Mapping[str, tuple[tuple[str, ...], Callable[[Any], Any] | None]]
    #: the class's JSON writer and parser (`json_of`, `parsed_fields`), generated by `_compile`
    write: Callable[[Any], dict[str, Any]]
    parse: Callable[[Mapping[str, Any], str, str], dict[str, Any]]
    #: their source, for a reader who wants to see what runs
    source: str


_SCHEMAS: dict[type, _Schema] = {}


def _schema(cls: type) -> _Schema:
    found = _SCHEMAS.get(cls)
    if found is not None:
        return found
    fields: list[Declared] = []
    rest_attr = None
    for f in dataclasses.fields(cls):
        if _REST in f.metadata:
            rest_attr = f.name
            continue
        if _KEY not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared: declare it with "
                            "ragtrace_store.label_fields.key(check, ...), so that the JSON writer and parser and "
                            "the labels table know it")
        spec, column = f.metadata[_KEY]
        json_key = spec.json or f.name
        copied = ((Column(column, (json_key,)),) if column else ()) + spec.columns
        fields.append(dataclasses.replace(spec, attr=f.name, json=json_key, columns=copied))
    required = tuple(d.json for d in fields if not d.optional)
    # lifted keys are optional at the top level: they may be given in their object only
    optional = (*(k for d in fields for k in d.lifted), *(d.json for d in fields if d.optional))
    known = frozenset((*required, *optional))
    reading: dict[str, tuple[tuple[str, ...], Callable[[Any], Any] | None]] = {}
    for d in fields:
        for k in d.lifted:
            inner = _inner(d, k)
            reading[k] = ((d.attr, inner.attr), inner.dump)
        reading[d.json] = ((d.attr,), d.dump)
    write, parse, source = _compile(cls, tuple(fields), rest_attr, required, optional)
    found = _SCHEMAS[cls] = _Schema(tuple(fields), rest_attr, known, reading, write, parse, source)
    return found


def _inner(d: Declared, json_key: str) -> Declared:
    """The declaration of a key that ``d`` lifts, in the class of the object ``d`` holds."""
    assert isinstance(d.check, Nested)  # `key` allows nothing else
    return next(i for i in _schema(d.check.cls).fields if i.json == json_key)


def _compile(cls: type, fields: tuple[Declared, ...], rest_attr: str | None, required: tuple[str, ...],
             optional: tuple[str, ...]) -> tuple[Callable[..., Any], Callable[..., Any], str]:
    """The JSON writer and parser of a record class: Python source generated from its declarations and
    compiled once, as `dataclasses` makes ``__init__`` (`_Schema.source` shows it). Straight-line code,
    a nested object written and read by its own class's functions called directly, because they run
    for every field of every record: a loop over the declarations took 1.2x the time of the
    hand-written parser it replaced and 2.6x the writer's. Checks, dumps and classes are bound by name
    in the functions' namespace and keys written as string literals (``repr``); the attributes are the
    dataclass's field names (identifiers). Nothing else reaches the source."""
    known = frozenset((*required, *optional))
    ns: dict[str, Any] = {"check_keys": check_keys, "lifted_object": _lifted_object, "obj": obj,
                          "required": required, "optional": optional, "needed": frozenset(required), "known": known}

    def written(i: int, d: Declared) -> str:
        """The expression of field ``i``'s JSON value."""
        value = f"record.{d.attr}"
        if isinstance(d.check, Nested) and d.dump == d.check.dump:
            ns[f"write_{i}"] = _schema(d.check.cls).write
            if d.check.many:
                return f"[write_{i}(x) for x in {value}]"
            return f"(None if {value} is None else write_{i}({value}))" if d.check.nullable else f"write_{i}({value})"
        ns[f"dump_{i}"] = d.dump
        return value if d.dump is None else f"dump_{i}({value})"

    def parsed(i: int, d: Declared) -> str:
        """The expression of field ``i``'s value, read from ``raw`` and checked."""
        k, name = repr(d.json), f"prefix + {d.json!r}"
        value = f"raw[{k}]"
        if d.lifted:  # the object with the lifted keys the top level gives
            ns[f"lifted_{i}"] = tuple((x, _inner(d, x).check, _inner(d, x).hint) for x in d.lifted)
            value = f"lifted_object(raw, {k}, lifted_{i}, where, prefix)"
        if isinstance(d.check, Nested) and not d.check.many:
            ns[f"class_{i}"], ns[f"parse_{i}"] = d.check.cls, _schema(d.check.cls).parse
            held = value if d.lifted else f"obj({value}, where, {name})"
            made = f"class_{i}(**parse_{i}({held}, where, prefix + {d.json + '.'!r}))"
            return f"(None if {value} is None else {made})" if d.check.nullable else made
        ns[f"check_{i}"] = d.check
        return f"check_{i}({value}, where, {name})"

    # the writer: one dict display in declaration order, but for a field left out when empty (and those
    # after it, to keep the order), written by statements
    shown: list[str] = []
    added: list[str] = []
    for i, d in enumerate(fields):
        value, k = written(i, d), repr(d.json)
        # the keys the field lifts come first, read from its object (named once, as "held")
        entries = [(repr(x), f"(held := {value})[{x!r}]" if j == 0 else f"held[{x!r}]") for j, x in enumerate(d.lifted)]
        entries.append((k, "held" if d.lifted else value))
        if d.omit_empty:
            added += [f"    if record.{d.attr}:", *(f"        out[{key}] = {v}" for key, v in entries)]
        elif added:
            added += [f"    out[{key}] = {v}" for key, v in entries]
        else:
            shown += [f"{key}: {v}" for key, v in entries]
    if rest_attr is not None:
        added.append(f"    out.update(record.{rest_attr})")
    write = ["def write(record):", "    out = {" + ",\n           ".join(shown) + "}", *added, "    return out"]
    # the parser: the keys checked in C (`check_keys` only to say what is wrong), then each field
    parse = ["def parse(raw, where, prefix):",
             "    keys = raw.keys()",
             f"    if not keys >= needed{' or not keys <= known' if rest_attr is None else ''}:",
             "        check_keys(" + ("raw" if rest_attr is None else "{k: v for k, v in raw.items() if k in known}")
             + ", where, prefix, required, optional)",
             "    values = {}"]
    for i, d in enumerate(fields):
        read = f"values[{d.attr!r}] = {parsed(i, d)}"
        parse += [f"    if {d.json!r} in raw:", f"        {read}"] if d.optional else [f"    {read}"]
    if rest_attr is not None:
        parse.append(f"    values[{rest_attr!r}] = {{k: v for k, v in raw.items() if k not in known}}")
    source = "\n".join([*write, "", *parse, "    return values", ""])
    exec(compile(source, f"<label fields of {cls.__qualname__}>", "exec"), ns)
    return ns["write"], ns["parse"], source


def _lifted_object(raw: Mapping[str, Any], json_key: str, lifted: tuple[tuple[str, Check, str], ...], where: str,
                   prefix: str) -> dict[str, Any]:
    """The object at ``json_key`` with the lifted keys the top level gives (the top level wins, and its
    errors name it there); each lifted key must be in one of the two."""
    held = dict(obj(raw[json_key], where, prefix + json_key))
    for k, check, hint in lifted:
        if k in raw:
            held[k] = check(raw[k], where, prefix + k)
        elif k not in held:
            fail(where, f"missing {prefix + k!r}{f' ({hint})' if hint else ''}")
    return held


def declared(cls: type) -> tuple[Declared, ...]:
    """The declared fields of a record class, in declaration order (its JSON object's key order);
    `TypeError` for a class with a field declared neither with `key` nor with `rest`."""
    return _schema(cls).fields


def columns_of(cls: type) -> tuple[Column, ...]:
    """The ``labels`` columns that copy values of a record class, in declaration order."""
    return tuple(c for d in _schema(cls).fields for c in d.columns)


def known_keys(cls: type) -> frozenset[str]:
    """Every key that a declaration of the class names in its JSON object."""
    return _schema(cls).known


def json_of(record: Any) -> dict[str, Any]:
    """A record's JSON object: its declared fields in declaration order, then its `rest` field's keys."""
    return _schema(type(record)).write(record)


def parsed_fields(cls: type, raw: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    """The keyword arguments of ``cls`` read from its JSON object ``raw``, each value checked;
    ``prefix`` (``generation.``) starts the keys' names in errors. Keys that no declaration names go to
    the class's `rest` field, or are an error if it has none."""
    return _schema(cls).parse(raw, where, prefix)


def paths_reader(cls: type, paths: Sequence[Sequence[str]],
                 empties: Sequence[Any] | None = None) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the values at ``paths`` of the JSON object (`json_of`) of a record of ``cls``,
    read from its attributes without writing the object; None where the record has no value (or the
    path meets a null object: a record without a generation label), or the path's value in ``empties``
    when that is not None. Generated and compiled once, as the writer is (`_compile`): the ``labels``
    columns of every row written and the summary of every record compared are read so. `KeyError` for
    a path the declarations do not have."""
    ns: dict[str, Any] = {}

    def chain(i: int, holder: str, attrs: list[str]) -> str:
        """``holder.attrs[0].attrs[1]...``, None as soon as one of them is None, the last one dumped."""
        step = f"{holder}.{attrs[0]}"
        if len(attrs) == 1:
            return step if ns[f"dump_{i}"] is None else f"dump_{i}({step})"
        held = f"v{i}_{len(attrs)}"
        return f"(None if ({held} := {step}) is None else {chain(i, held, attrs[1:])})"

    values = []
    for i, path in enumerate(paths):
        attrs: list[str] = []
        holder: type | None = cls
        for j, part in enumerate(path):
            if holder is None:
                raise KeyError(f"{'.'.join(path)}: {path[j - 1]!r} holds no record object")
            found, ns[f"dump_{i}"] = _schema(holder).reading[part]
            attrs += found
            check = next(d for d in _schema(holder).fields if d.attr == found[0]).check
            # a lifted key (two attributes) holds a plain value, as does a field without a Nested check
            holder = check.cls if isinstance(check, Nested) and len(found) == 1 and not check.many else None
        value = chain(i, "record", attrs)
        if empties is not None and empties[i] is not None:
            ns[f"empty_{i}"] = empties[i]
            value = f"(empty_{i} if (v{i} := {value}) is None else v{i})"
        values.append(value)
    source = "def read(record):\n    return (" + ",\n            ".join(values) + ",)\n"
    exec(compile(source, f"<label paths of {cls.__qualname__}>", "exec"), ns)
    read: Callable[[Any], tuple[Any, ...]] = ns["read"]
    return read
