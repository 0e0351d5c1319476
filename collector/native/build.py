"""Build ``ragtrace_collector._otlp_native``, the collector's attribute walk (required: the collector has no other).

    .venv/bin/python collector/native/build.py [--check]

Needs a C++ compiler, Google's protobuf C++ runtime and ``protoc`` (Debian: ``apt-get install g++
libprotobuf-dev protobuf-compiler``; `make` does this on Debian). Steps:

1. The OTLP schema is written as ``.proto`` text from the descriptors compiled into the installed
   ``opentelemetry-proto`` package, so the C++ classes are generated from exactly the messages
   the Python side decodes with, and no copy of the upstream files lives in this repository.
2. ``protoc --cpp_out`` generates the message classes; ``g++`` compiles them with
   ``otlp_walk.cc`` into ``collector/src/ragtrace_collector/_otlp_native<EXT_SUFFIX>`` next to the Python modules.
3. ``g++`` compiles ``otlp_measure.cc`` (the request-cost scan, `ragtrace_collector.request_cost`; no
   protobuf runtime) into ``_otlp_measure<EXT_SUFFIX>`` beside it.

Without the module (or with one built from an older ``otlp_walk.cc``) ``ragtrace serve`` refuses to
start and says to run this (`ragtrace_collector.native_walk`). ``--check`` exits 0 if the module is
built and current, 1 if not (nothing is built).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

HERE = Path(__file__).resolve().parent
COLLECTOR = HERE.parent
BUILD = COLLECTOR.parent / "build" / "native"
TARGET = COLLECTOR / "src" / "ragtrace_collector" / f"_otlp_native{sysconfig.get_config_var('EXT_SUFFIX')}"
MEASURE_TARGET = TARGET.with_name(f"_otlp_measure{sysconfig.get_config_var('EXT_SUFFIX')}")

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double", FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32", FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32", FieldDescriptor.TYPE_SFIXED32: "sfixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64", FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
}


def _type_name(f: FieldDescriptor) -> str:
    if f.type in _SCALARS:
        return _SCALARS[f.type]
    ref = f.message_type or f.enum_type
    assert ref is not None, f.full_name
    return "." + ref.full_name


def _message(msg: Descriptor, indent: str) -> list[str]:
    lines = [f"{indent}message {msg.name} {{"]
    for enum in msg.enum_types:
        lines.append(f"{indent}  enum {enum.name} {{")
        lines += [f"{indent}    {v.name} = {v.number};" for v in enum.values]
        lines.append(f"{indent}  }}")
    for nested in msg.nested_types:
        lines += _message(nested, indent + "  ")
    oneofs = {f.name: o for o in msg.oneofs for f in o.fields}
    emitted: set[str] = set()
    for f in msg.fields:
        decl = f"{'repeated ' if f.is_repeated else ''}{_type_name(f)} {f.name} = {f.number};"
        oneof = oneofs.get(f.name)
        if oneof is None or oneof.name.startswith("_"):  # "_x" oneofs are proto3 `optional`
            lines.append(f"{indent}  {decl}")
        elif oneof.name not in emitted:
            emitted.add(oneof.name)
            lines.append(f"{indent}  oneof {oneof.name} {{")
            lines += [f"{indent}    {_type_name(g)} {g.name} = {g.number};" for g in oneof.fields]
            lines.append(f"{indent}  }}")
    lines.append(f"{indent}}}")
    return lines


def proto_source(fd: FileDescriptor) -> str:
    """A FileDescriptor as .proto text: packages, imports, enums, messages, oneofs (no options)."""
    lines = ['syntax = "proto3";', f"package {fd.package};"]
    lines += [f'import "{dep.name}";' for dep in fd.dependencies]
    for enum in fd.enum_types_by_name.values():
        lines.append(f"enum {enum.name} {{")
        lines += [f"  {v.name} = {v.number};" for v in enum.values]
        lines.append("}")
    for msg in fd.message_types_by_name.values():
        lines += _message(msg, "")
    return "\n".join(lines) + "\n"


def write_schema(root: Path) -> list[Path]:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    written: list[Path] = []
    seen: set[str] = set()

    def visit(fd: FileDescriptor) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        path = root / fd.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(proto_source(fd))
        written.append(path)

    visit(trace_service_pb2.DESCRIPTOR)
    return written


def build() -> Path:
    missing = [tool for tool in ("protoc", "g++") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"cannot build the native OTLP walk: {', '.join(missing)} not found "
                         "(Debian: apt-get install g++ libprotobuf-dev protobuf-compiler)")
    if BUILD.exists():
        shutil.rmtree(BUILD)
    proto_root, gen = BUILD / "proto", BUILD / "gen"
    gen.mkdir(parents=True)
    protos = write_schema(proto_root)
    subprocess.run(["protoc", f"-I{proto_root}", f"--cpp_out={gen}", *map(str, protos)], check=True)
    sources = [str(HERE / "otlp_walk.cc"), *map(str, sorted(gen.rglob("*.pb.cc")))]
    tmp = TARGET.with_suffix(".tmp")
    cmd = ["g++", "-O2", "-shared", "-fPIC", "-std=c++20", "-fvisibility=hidden",
           f"-I{sysconfig.get_paths()['include']}", f"-I{gen}", *sources, "-o", str(tmp), "-lprotobuf"]
    subprocess.run(cmd, check=True)
    tmp.replace(TARGET)  # atomic: a running collector never sees half a file
    build_measure()
    return TARGET


def build_measure() -> Path:
    """The request-cost scan (``otlp_measure.cc``): plain C++ over the wire bytes, no protobuf runtime."""
    tmp = MEASURE_TARGET.with_suffix(".tmp")
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-std=c++20", "-fvisibility=hidden",
                    f"-I{sysconfig.get_paths()['include']}", str(HERE / "otlp_measure.cc"), "-o", str(tmp)],
                   check=True)
    tmp.replace(MEASURE_TARGET)
    return MEASURE_TARGET


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report whether the module imports")
    a = ap.parse_args()
    if a.check:
        from ragtrace_collector.native_walk import NativeWalkMissing, require

        try:
            require()
        except NativeWalkMissing as exc:
            print(exc)
            return 1
        print(f"native OTLP walk: {TARGET}")
        return 0
    print(f"built {build()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
