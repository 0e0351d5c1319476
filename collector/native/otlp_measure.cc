// ragtrace_collector._otlp_measure: what an OTLP ExportTraceServiceRequest body decodes to, counted
// from its wire bytes without building any message (ragtrace_collector.request_cost explains why, and
// holds the same scan in Python: count_in_python, which tests/collector/test_request_cost.py checks
// this against).
//
//   count(body, max_depth) -> (spans, attributes, values, events_and_links)
//
// Only the fields of the OTLP schema that hold messages are followed (the table in `child`); every
// other field is skipped whatever its number. A body no protobuf parser would accept (a truncated
// field, wire type 6 or 7, a group left open, nesting deeper than max_depth) raises ValueError. The
// scan runs without the GIL.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>

namespace {

enum Kind : int {
  kRequest, kResourceSpans, kResource, kScopeSpans, kScope, kSpan, kEvent, kLink,
  kKeyValue, kAnyValue, kArray, kKvList, kNone
};

// The kind of message field `number` of a `kind` message holds, or kNone (opentelemetry-proto:
// collector/trace/v1, trace/v1, common/v1, resource/v1).
Kind child(Kind kind, uint64_t number) {
  switch (kind) {
    case kRequest: return number == 1 ? kResourceSpans : kNone;
    case kResourceSpans: return number == 1 ? kResource : number == 2 ? kScopeSpans : kNone;
    case kResource: return number == 1 ? kKeyValue : kNone;
    case kScopeSpans: return number == 1 ? kScope : number == 2 ? kSpan : kNone;
    case kScope: return number == 3 ? kKeyValue : kNone;
    case kSpan: return number == 9 ? kKeyValue : number == 11 ? kEvent : number == 13 ? kLink : kNone;
    case kEvent: return number == 3 ? kKeyValue : kNone;
    case kLink: return number == 4 ? kKeyValue : kNone;
    case kKeyValue: return number == 2 ? kAnyValue : kNone;
    case kAnyValue: return number == 5 ? kArray : number == 6 ? kKvList : kNone;
    case kArray: return number == 1 ? kAnyValue : kNone;
    case kKvList: return number == 1 ? kKeyValue : kNone;
    default: return kNone;
  }
}

struct Counts {
  uint64_t spans = 0, attributes = 0, values = 0, events = 0;
};

struct Scan {
  const uint8_t* begin;
  int max_depth;
  Counts counts;
  const char* error = nullptr;
  size_t error_at = 0;

  bool fail(const char* why, const uint8_t* at) {
    if (error == nullptr) {
      error = why;
      error_at = static_cast<size_t>(at - begin);
    }
    return false;
  }

  bool varint(const uint8_t*& p, const uint8_t* end, uint64_t& out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) return fail("truncated varint", p);
      uint8_t b = *p++;
      result |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (b < 0x80) {
        out = result;
        return true;
      }
    }
    return fail("overlong varint", p);
  }

  // One message of `kind` in [p, end), or (group != 0) the fields of an open group up to its end tag,
  // leaving p after it.
  bool message(const uint8_t*& p, const uint8_t* end, Kind kind, int depth, uint64_t group) {
    if (depth > max_depth) return fail("messages nested too deep", p);
    while (p < end) {
      uint64_t tag;
      if (!varint(p, end, tag)) return false;
      uint64_t number = tag >> 3;
      unsigned wire = static_cast<unsigned>(tag & 7);
      if (number == 0) return fail("field number 0", p);
      switch (wire) {
        case 0: {
          uint64_t ignored;
          if (!varint(p, end, ignored)) return false;
          break;
        }
        case 1:
          if (end - p < 8) return fail("truncated fixed64", p);
          p += 8;
          break;
        case 5:
          if (end - p < 4) return fail("truncated fixed32", p);
          p += 4;
          break;
        case 2: {
          uint64_t length;
          if (!varint(p, end, length)) return false;
          if (length > static_cast<uint64_t>(end - p)) return fail("a field runs past its message", p);
          const uint8_t* stop = p + length;
          Kind inner = group != 0 ? kNone : child(kind, number);
          if (inner != kNone) {
            if (inner == kSpan) counts.spans++;
            else if (inner == kKeyValue) counts.attributes++;
            else if (inner == kAnyValue && kind == kArray) counts.values++;
            else if (inner == kEvent || inner == kLink) counts.events++;
            const uint8_t* q = p;
            if (!message(q, stop, inner, depth + 1, 0)) return false;
          }
          p = stop;
          break;
        }
        case 3:  // a group (proto2): legal in the unknown fields a parser keeps
          if (!message(p, end, kind, depth + 1, number)) return false;
          break;
        case 4:
          if (group != number) return fail("an end-group tag without its start", p);
          return true;
        default:
          return fail("wire type 6 or 7", p);
      }
    }
    if (group != 0) return fail("a group is not closed", p);
    return true;
  }
};

PyObject* count(PyObject*, PyObject* args) {
  Py_buffer body;
  int max_depth;
  if (!PyArg_ParseTuple(args, "y*i", &body, &max_depth)) return nullptr;
  Scan scan{static_cast<const uint8_t*>(body.buf), max_depth, Counts{}};
  bool ok;
  Py_BEGIN_ALLOW_THREADS
  const uint8_t* p = scan.begin;
  ok = scan.message(p, scan.begin + body.len, kRequest, 0, 0);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&body);
  if (!ok) {
    PyErr_Format(PyExc_ValueError, "not a valid protobuf body: %s at byte %zu", scan.error, scan.error_at);
    return nullptr;
  }
  return Py_BuildValue("(KKKK)", static_cast<unsigned long long>(scan.counts.spans),
                       static_cast<unsigned long long>(scan.counts.attributes),
                       static_cast<unsigned long long>(scan.counts.values),
                       static_cast<unsigned long long>(scan.counts.events));
}

PyMethodDef methods[] = {
    {"count", count, METH_VARARGS,
     "count(body, max_depth) -> (spans, attributes, values, events_and_links) of an OTLP request body."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_otlp_measure",
                      "What an OTLP request body decodes to, counted from its wire bytes.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__otlp_measure() { return PyModule_Create(&module); }
