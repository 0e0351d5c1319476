// ragtrace_collector._otlp_native: the collector's attribute walk and document rows, compiled.
//
// Why: with Python protobuf every attribute costs several Python objects, a ragtrace query carries
// ~260 attributes (most of them document fields), and turning them into `documents`/`passages`
// rows in Python is most of the collector's CPU, all of it under the GIL. Here a request is parsed
// by Google's C++ protobuf runtime (arena-allocated, without the GIL) into classes that protoc
// generated from the official OTLP schema (build.py writes that schema from the descriptors the
// `opentelemetry-proto` package ships: decoding is protobuf's, not ours). Document fields never
// become Python objects: their rows come out as Arrow column buffers, built without the GIL too.
//
// This is the only walk: every `documents` and `passages` row is made here (span_documents), for
// OpenInference document attributes and for the GenAI document lists that Python has read out of
// their JSON (`interop.gen_ai_documents`). The meaning of a span (roots, annotations, gold,
// references, rejections) is decided in Python (`spans.assemble_spans`), which asks verify() and
// hands documents() its plan. Python is asked only for what it defines: the attribute names and
// limits (configure()), a non-string value as text (`values.value_text`) and sha256.
//
//   request = parse(body)              # ParseError (a ValueError) if it is not a valid request
//   request.spans() -> [(resource attributes, [span tuple, ...]), ...]
//       span tuple = (trace_id, span_id, parent_span_id, name, start_ns, end_ns, status_code,
//                     status_message, events_or_None, other_attributes, ordinal_or_None,
//                     dropped_attributes_count)
//       ordinal: the span's index when it has document attributes, for verify() and documents()
//   request.verify(ordinal, tenant) -> bool  # every claimed content hash is its text's
//   verified_cache(max_bytes) -> None  # bound (and empty) the texts proven to hash to their hash
//   verified_cache_stats() -> (entries, bytes, hits, hashed)
//   request.documents(plan, tenant, written) -> (documents columns, passages columns, nbytes)
//       plan: [(documents, trace_id_hex, span_id_hex, start_ms, top_k_or_None, truncating), ...]
//       documents: a span's ordinal (its document attributes), or a GenAI document list
//                  [(id, score_or_None, content_or_None, metadata_or_None), ...] (rank = index)
//   INTERFACE: the version of this interface (native_walk.py refuses a module built for another)

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/logging.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
using opentelemetry::proto::common::v1::AnyValue;
using opentelemetry::proto::common::v1::KeyValue;
using opentelemetry::proto::trace::v1::Span;

// --- configuration (configure(), from ragtrace.semconv and documents.py: one source of names) ---
std::vector<std::string> g_prefixes;  // document attribute prefixes, in stage order
std::vector<std::string> g_stages;    // stage names, same order
std::vector<std::string> g_fields;    // field names ("document.id", ...) in field-code order
long long g_max_rank = 0;
int g_reranked_stage = -1;
int g_gen_ai_stage = -1;  // the stage of GenAI documents (retrieved)
PyObject* g_to_text = nullptr;  // values.value_text: a non-string value as text
PyObject* g_digest = nullptr;   // hex sha256 of a str
PyObject* g_error = nullptr;    // ParseError
enum Code { F_ID = 0, F_SCORE = 1, F_CONTENT = 2, F_META = 3, F_HASH = 4 };
// The version of the interface below; native_walk.INTERFACE must be the same, else the module is
// stale (built from an older otlp_walk.cc) and the collector refuses to start. Raise both together.
const int kInterface = 2;

struct Ref {  // a strong reference released at scope end
  PyObject* p;
  explicit Ref(PyObject* o = nullptr) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* release() {
    PyObject* o = p;
    p = nullptr;
    return o;
  }
};

PyObject* str_of(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
}

// --- AnyValue -> Python: JSON-able values (bytes as hex, nan/inf as text) ------------------------
PyObject* any_value(const AnyValue& v, int depth);

PyObject* kv_dict(const google::protobuf::RepeatedPtrField<KeyValue>& kvs, int depth) {
  Ref d(PyDict_New());
  if (!d.p) return nullptr;
  for (const KeyValue& kv : kvs) {
    Ref key(str_of(kv.key()));
    if (!key.p) return nullptr;
    Ref val(any_value(kv.value(), depth + 1));
    if (!val.p || PyDict_SetItem(d.p, key.p, val.p) < 0) return nullptr;
  }
  return d.release();
}

PyObject* any_value(const AnyValue& v, int depth) {
  if (depth > 200) {  // protobuf's recursion limit (100) stops this first; belt and braces
    PyErr_SetString(g_error, "attribute values nested too deeply");
    return nullptr;
  }
  switch (v.value_case()) {
    case AnyValue::kStringValue:
      return str_of(v.string_value());
    case AnyValue::kIntValue:
      return PyLong_FromLongLong(v.int_value());
    case AnyValue::kDoubleValue: {
      double d = v.double_value();
      if (std::isfinite(d)) return PyFloat_FromDouble(d);
      Ref f(PyFloat_FromDouble(d));  // nan/inf as Python's str() spells them, so JSON stays valid
      return f.p ? PyObject_Str(f.p) : nullptr;
    }
    case AnyValue::kBoolValue:
      return PyBool_FromLong(v.bool_value());
    case AnyValue::kArrayValue: {
      const auto& values = v.array_value().values();
      Ref list(PyList_New(values.size()));
      if (!list.p) return nullptr;
      for (int i = 0; i < values.size(); ++i) {
        PyObject* item = any_value(values[i], depth + 1);
        if (!item) return nullptr;
        PyList_SET_ITEM(list.p, i, item);
      }
      return list.release();
    }
    case AnyValue::kKvlistValue:
      return kv_dict(v.kvlist_value().values(), depth);
    case AnyValue::kBytesValue: {
      const std::string& b = v.bytes_value();
      Ref raw(PyBytes_FromStringAndSize(b.data(), static_cast<Py_ssize_t>(b.size())));
      return raw.p ? PyObject_CallMethod(raw.p, "hex", nullptr) : nullptr;
    }
    default:
      Py_RETURN_NONE;
  }
}

// Text that is not in the parsed message (values converted from other types, digests) lives here,
// so that everything else can be a view into the request's arena.
using Owned = std::deque<std::string>;

// Document values are read without the GIL when they are plain (strings; numbers for scores).
// Anything else needs Python (`python` false: `*needs_python` is set and the caller starts again
// holding the GIL).
struct PyAccess {
  bool python;               // the GIL is held: Python may be called
  bool needs_python = false;  // set when a value needed Python and `python` was false
};

// A value as text (a string as it is, anything else as `values.value_text` spells it); false on
// failure (a Python error set, or needs_python).
bool as_text(const AnyValue& v, Owned* owned, std::string_view* out, PyAccess* py) {
  if (v.value_case() == AnyValue::kStringValue) {
    *out = v.string_value();
    return true;
  }
  if (v.value_case() == AnyValue::VALUE_NOT_SET) {
    *out = std::string_view();
    return true;
  }
  if (!py->python) {
    py->needs_python = true;
    return false;
  }
  Ref value(any_value(v, 0));
  if (!value.p) return false;
  Ref text(PyUnicode_Check(value.p) ? Py_NewRef(value.p) : PyObject_CallOneArg(g_to_text, value.p));
  if (!text.p) return false;
  Py_ssize_t n;
  const char* s = PyUnicode_AsUTF8AndSize(text.p, &n);
  if (!s) return false;
  *out = owned->emplace_back(s, n);
  return true;
}

// Python's float() of a string, if finite: every spelling Python accepts ("1e3", " 0.5 ", "1_000").
std::optional<double> float_of_text(const std::string& text) {
  Ref s(str_of(text));
  Ref f(s.p ? PyFloat_FromString(s.p) : nullptr);
  if (!f.p) {
    PyErr_Clear();
    return std::nullopt;
  }
  double d = PyFloat_AS_DOUBLE(f.p);
  if (std::isfinite(d)) return d;
  return std::nullopt;
}

// A score: a finite float, or nothing (false only for needs_python).
bool as_float(const AnyValue& v, std::optional<double>* out, PyAccess* py) {
  switch (v.value_case()) {
    case AnyValue::kDoubleValue:
      *out = std::isfinite(v.double_value()) ? std::optional<double>(v.double_value()) : std::nullopt;
      return true;
    case AnyValue::kIntValue:
      *out = static_cast<double>(v.int_value());
      return true;
    case AnyValue::kStringValue:
      if (!py->python) {
        py->needs_python = true;
        return false;
      }
      *out = float_of_text(v.string_value());
      return true;
    default:
      *out = std::nullopt;
      return true;
  }
}


// `<prefix>.<rank>.<field>` (OpenInference document attributes): (stage * 2^24 + rank, field
// code), or false. The first prefix followed by "." decides; a rank is 1 to 9 ASCII digits, at
// most g_max_rank; anything else is an ordinary attribute.
bool document_key(const std::string& key, long long* slot, int* code) {
  for (size_t stage = 0; stage < g_prefixes.size(); ++stage) {
    const std::string& prefix = g_prefixes[stage];
    if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0 || key[prefix.size()] != '.')
      continue;
    // the rank: 1 to 9 ASCII digits up to the next "."
    size_t start = prefix.size() + 1, dot = start;
    long long rank = 0;
    for (; dot < key.size() && key[dot] != '.'; ++dot) {
      char c = key[dot];
      if (c < '0' || c > '9' || dot - start >= 9) return false;
      rank = rank * 10 + (c - '0');
    }
    if (dot == start || dot == key.size()) return false;
    size_t field_len = key.size() - dot - 1;
    for (size_t f = 0; f < g_fields.size(); ++f) {
      if (g_fields[f].size() == field_len && std::memcmp(key.data() + dot + 1, g_fields[f].data(), field_len) == 0) {
        if (rank > g_max_rank) return false;
        *slot = (static_cast<long long>(stage) << 24) + rank;
        *code = static_cast<int>(f);
        return true;
      }
    }
    return false;
  }
  return false;
}

size_t code_points(std::string_view s) {  // Python's len() of the decoded text
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string prefix_code_points(std::string_view s, size_t count) {  // Python's s[:count]
  size_t seen = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == count) break;
  }
  return std::string(s.substr(0, i));
}

// --- one span's document fields: insertion-ordered, a repeated key's last value wins -------------
template <typename T>
struct SlotMap {
  std::vector<long long> slots;
  std::vector<T> values;
  bool ascending = true;  // the SDK's case: slots arrive in increasing order, no map needed
  std::unordered_map<long long, size_t> index;  // built only when they do not
  T& put(long long slot) {
    if (ascending && (slots.empty() || slot > slots.back())) {
      slots.push_back(slot);
      values.emplace_back();
      return values.back();
    }
    if (ascending) {
      ascending = false;
      for (size_t i = 0; i < slots.size(); ++i) index.emplace(slots[i], i);
    }
    auto [it, inserted] = index.emplace(slot, slots.size());
    if (inserted) {
      slots.push_back(slot);
      values.emplace_back();
    }
    return values[it->second];
  }
  const T* get(long long slot) const {
    if (ascending) {
      auto it = std::lower_bound(slots.begin(), slots.end(), slot);
      return it == slots.end() || *it != slot ? nullptr : &values[it - slots.begin()];
    }
    auto it = index.find(slot);
    return it == index.end() ? nullptr : &values[it->second];
  }
  bool empty() const { return slots.empty(); }
  size_t size() const { return slots.size(); }
  bool same_keys(const std::vector<long long>& order) const { return slots == order; }
};

struct SpanDocuments {
  SlotMap<std::string_view> ids, metas, hashes;
  SlotMap<std::optional<double>> scores;
  SlotMap<const AnyValue*> contents;
};

// A document attribute of a span, found by spans() and read by documents().
struct DocAttr {
  const AnyValue* value;
  long long slot;
  int code;
};

bool read_documents(const std::vector<DocAttr>& attrs, Owned* owned, SpanDocuments* d, PyAccess* py) {
  for (const DocAttr& a : attrs) {
    long long slot = a.slot;
    const AnyValue& v = *a.value;
    switch (a.code) {
      case F_CONTENT:
        d->contents.put(slot) = &v;  // read only if the text is needed
        break;
      case F_SCORE:
        if (!as_float(v, &d->scores.put(slot), py)) return false;
        break;
      default: {
        SlotMap<std::string_view>& target = a.code == F_ID ? d->ids : a.code == F_META ? d->metas : d->hashes;
        if (!as_text(v, owned, &target.put(slot), py)) return false;
      }
    }
  }
  return true;
}

// --- Arrow-ready column builders ----------------------------------------------------------------
struct StrCol {
  std::vector<int32_t> offsets{0};
  std::string data;
  void add(std::string_view s) {
    data += s;
    offsets.push_back(static_cast<int32_t>(data.size()));
  }
  size_t size() const { return offsets.size() - 1; }
};
template <typename T>
struct NumCol {
  std::vector<T> values;
  std::vector<uint8_t> valid;  // 1 = present
  void add(T v, bool ok = true) {
    values.push_back(ok ? v : T{});
    valid.push_back(ok);
  }
};

PyObject* bytes_of(const void* p, size_t n) {
  return PyBytes_FromStringAndSize(static_cast<const char*>(p), static_cast<Py_ssize_t>(n));
}
PyObject* str_col(const StrCol& c) {
  return Py_BuildValue("(sNN)", "str", bytes_of(c.offsets.data(), c.offsets.size() * 4),
                       bytes_of(c.data.data(), c.data.size()));
}
template <typename T>
PyObject* num_col(const char* kind, const NumCol<T>& c) {
  return Py_BuildValue("(sNN)", kind, bytes_of(c.values.data(), c.values.size() * sizeof(T)),
                       bytes_of(c.valid.data(), c.valid.size()));
}

struct Output {
  // documents
  StrCol trace_id, span_id, stage, doc_id, content_hash, metadata;
  NumCol<int64_t> rank, top_k, start_time;
  NumCol<double> score;
  // passages
  StrCol p_hash, p_content;
  NumCol<int64_t> p_length;
  NumCol<uint8_t> p_truncated;
  std::unordered_map<std::string_view, long long> seen;  // content hash -> length, this request
  Owned owned;  // text the views above point to that is not in the message
  PyAccess py{true};
  // written.get((tenant, hash), 0) of every hash of the request, looked up beforehand holding the GIL
  const std::unordered_map<std::string_view, long long>* known_lengths = nullptr;
  long long nbytes = 0;
};

// written.get((tenant, hash), 0): the length of the store's copy of a passage, positive when it
// is the full text (the writer's cache). Sets *err (with a Python error) on failure.
long long known_length(PyObject* written, PyObject* tenant, std::string_view hash, bool* err) {
  if (written == Py_None) return 0;
  Ref h(PyUnicode_DecodeUTF8(hash.data(), static_cast<Py_ssize_t>(hash.size()), "strict"));
  Ref key(h.p ? PyTuple_Pack(2, tenant, h.p) : nullptr);
  if (!key.p) {
    *err = true;
    return 0;
  }
  PyObject* value;
  Ref owned;
  if (PyDict_Check(written)) {
    value = PyDict_GetItemWithError(written, key.p);  // borrowed
    if (!value) {
      if (PyErr_Occurred()) *err = true;
      return 0;
    }
  } else {
    owned.p = PyObject_CallMethod(written, "get", "Oi", key.p, 0);
    if (!owned.p) {
      *err = true;
      return 0;
    }
    value = owned.p;
  }
  long long n = PyLong_AsLongLong(value);
  if (n == -1 && PyErr_Occurred()) {
    *err = true;
    return 0;
  }
  return n;
}

bool sha256_hex(std::string_view text, Owned* owned, std::string_view* out, PyAccess* py) {
  if (!py->python) {
    py->needs_python = true;
    return false;
  }
  Ref s(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict"));
  Ref hex(s.p ? PyObject_CallOneArg(g_digest, s.p) : nullptr);
  if (!hex.p) return false;
  Py_ssize_t n;
  const char* p = PyUnicode_AsUTF8AndSize(hex.p, &n);
  if (!p) return false;
  *out = owned->emplace_back(p, n);
  return true;
}

void add_passage(Output* o, std::string_view hash, std::string_view content, long long n, bool truncated) {
  o->p_hash.add(hash);
  o->p_content.add(content);
  o->p_length.add(n);
  o->p_truncated.add(truncated);
  o->nbytes += n + 120;
}

// The `documents` rows of one span, and `passages` for text not yet seen in this request.
//
// The SDK's shape (every document has an id and a content hash, its fields in one order, nothing
// truncated) takes the fast path: the columns are the fields as sent, and text is read only for a
// hash neither seen in this request nor in the store in full (the same hash means the same full
// text; verify() has checked it). Otherwise any (stage, rank) with at least one field is a
// document: its text is read to hash it (no hash sent, or a truncating span: a prefix is kept
// under its own hash and flagged `truncated`, so it never stands for the full text of the hash it
// claimed) or for a passage not yet seen; a document without an id takes "sha256:" and the first
// 16 hex digits of its content hash.
bool span_documents(const std::vector<DocAttr>& attrs, std::string_view trace_id, std::string_view span_id, long long start_ms, std::optional<long long> top_k, bool truncating,
                    Output* o) {
  SpanDocuments d;
  if (!read_documents(attrs, &o->owned, &d, &o->py)) return false;
  std::vector<long long> slots = d.ids.slots;
  std::vector<std::string_view> doc_ids, chashes;
  std::vector<std::optional<double>> score_col;
  std::vector<std::string_view> meta_col;
  bool all_ids = true, all_hashes = true;
  for (const auto& s : d.ids.values) all_ids = all_ids && !s.empty();
  for (const auto& s : d.hashes.values) all_hashes = all_hashes && !s.empty();
  if (!truncating && d.hashes.same_keys(slots) && (d.contents.empty() || d.contents.same_keys(slots)) &&
      (d.scores.empty() || d.scores.same_keys(slots)) && (d.metas.empty() || d.metas.same_keys(slots)) && all_ids &&
      all_hashes) {
    // The SDK's shape: text is read only for a hash neither seen in this request nor stored in full.
    doc_ids = d.ids.values;
    chashes = d.hashes.values;
    std::string_view content;
    for (size_t i = 0; i < d.contents.size() && i < chashes.size(); ++i) {
      std::string_view chash = chashes[i];
      if (o->seen.count(chash)) continue;
      auto known = o->known_lengths->find(chash);
      if (known != o->known_lengths->end() && known->second > 0) continue;
      if (!as_text(*d.contents.values[i], &o->owned, &content, &o->py)) return false;
      if (content.empty()) continue;
      long long n = static_cast<long long>(code_points(content));
      o->seen[chash] = n;
      add_passage(o, chash, content, n, false);
    }
    score_col = d.scores.empty() ? std::vector<std::optional<double>>(slots.size()) : d.scores.values;
    meta_col = d.metas.empty() ? std::vector<std::string_view>(slots.size()) : d.metas.values;
  } else {
    // Any (stage, rank) with at least one field is a document.
    auto subset = [&](const auto& m) {
      if (m.size() > d.ids.size()) return false;
      for (long long s : m.slots)
        if (!d.ids.get(s)) return false;
      return true;
    };
    if (!(subset(d.scores) && subset(d.contents) && subset(d.metas) && subset(d.hashes))) {
      std::unordered_map<long long, bool> in;
      slots.clear();
      for (const auto* order : {&d.ids.slots, &d.scores.slots, &d.contents.slots, &d.metas.slots, &d.hashes.slots})
        for (long long s : *order)
          if (in.emplace(s, true).second) slots.push_back(s);
    }
    for (long long s : slots) {
      const std::string_view* id = d.ids.get(s);
      const std::string_view* h = d.hashes.get(s);
      doc_ids.push_back(id ? *id : std::string_view());
      chashes.push_back(h ? *h : std::string_view());
    }
    std::string_view content;
    for (size_t i = 0; i < slots.size(); ++i) {
      std::string_view& chash = chashes[i];
      const AnyValue* const* ref = d.contents.get(slots[i]);
      bool truncated = false, have = false;
      if (ref && (truncating || chash.empty() || !o->seen.count(chash))) {
        if (!as_text(**ref, &o->owned, &content, &o->py)) return false;
        have = !content.empty();
      }
      if (have && (truncating || chash.empty())) {
        std::string_view digest;
        if (!sha256_hex(content, &o->owned, &digest, &o->py)) return false;
        truncated = !chash.empty() && chash != digest;
        chash = digest;  // a prefix is kept under its own hash
      }
      if (doc_ids[i].empty() && !chash.empty())
        doc_ids[i] = o->owned.emplace_back("sha256:" + prefix_code_points(chash, 16));
      if (have && !chash.empty()) {
        long long n = static_cast<long long>(code_points(content));
        auto it = o->seen.find(chash);
        if (it != o->seen.end() && it->second >= n) continue;
        o->seen[chash] = n;
        add_passage(o, chash, content, n, truncated);
      }
    }
    for (long long s : slots) {
      const auto* sc = d.scores.get(s);
      score_col.push_back(sc ? *sc : std::nullopt);
      const std::string_view* m = d.metas.get(s);
      meta_col.push_back(m ? *m : std::string_view());
    }
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    int stage = static_cast<int>(slots[i] >> 24);
    o->trace_id.add(trace_id);
    o->span_id.add(span_id);
    o->stage.add(g_stages[stage]);
    o->rank.add(slots[i] & ((1LL << 24) - 1));
    o->doc_id.add(doc_ids[i]);
    o->score.add(score_col[i].value_or(0.0), score_col[i].has_value());
    o->content_hash.add(chashes[i]);
    o->metadata.add(meta_col[i]);
    bool has_top_k = top_k.has_value() && stage == g_reranked_stage;
    o->top_k.add(has_top_k ? *top_k : 0, has_top_k);
    o->start_time.add(start_ms);
    o->nbytes += 160 + static_cast<long long>(code_points(doc_ids[i]));
  }
  return true;
}

// --- the Request object -------------------------------------------------------------------------
// Arena first blocks are kept for the next request: a fresh multi-megabyte block per request costs
// more in page faults than parsing into it. Guarded by the GIL (taken and given back with it held).
struct Block {
  char* data = nullptr;
  size_t size = 0;
};
std::vector<Block> g_spare_blocks;
const size_t kMaxSpareBlocks = 4;
const size_t kMaxSpareBlockSize = 16u << 20;  // at most 4 × 16 MB kept

Block take_block(size_t want) {
  for (size_t i = 0; i < g_spare_blocks.size(); ++i) {
    if (g_spare_blocks[i].size >= want) {
      Block b = g_spare_blocks[i];
      g_spare_blocks.erase(g_spare_blocks.begin() + static_cast<long>(i));
      return b;
    }
  }
  Block b;
  b.size = std::max<size_t>(want, 1u << 20);
  b.data = static_cast<char*>(std::malloc(b.size));
  if (!b.data) b.size = 0;
  return b;
}

void give_block(Block b) {
  if (!b.data) return;
  if (b.size > kMaxSpareBlockSize) {
    std::free(b.data);
    return;
  }
  g_spare_blocks.push_back(b);
  if (g_spare_blocks.size() > kMaxSpareBlocks) {  // keep the largest
    auto smallest = std::min_element(g_spare_blocks.begin(), g_spare_blocks.end(),
                                     [](const Block& x, const Block& y) { return x.size < y.size; });
    std::free(smallest->data);
    g_spare_blocks.erase(smallest);
  }
}

struct Request {
  PyObject_HEAD
  google::protobuf::Arena* arena;
  Block block;  // the arena's first block, ours
  ExportTraceServiceRequest* message;
  std::vector<const Span*>* spans;  // flattened, in request order
  std::vector<std::vector<DocAttr>>* docs;             // per span: its document attributes
  std::vector<std::vector<const KeyValue*>>* others;  // per span: the rest
  // verify(): content hash -> its checked text, in this request (views into the message, or into
  // `verify_owned` for texts converted from other value types)
  std::unordered_map<std::string_view, std::string_view>* verified;
  Owned* verify_owned;
};

void request_dealloc(Request* self) {
  // Freeing a request's strings is a few hundred free() calls per trace: no Python needed.
  Py_BEGIN_ALLOW_THREADS delete self->spans;
  delete self->docs;
  delete self->others;
  delete self->verified;
  delete self->verify_owned;
  delete self->arena;  // frees the message and any further blocks
  Py_END_ALLOW_THREADS
  give_block(self->block);
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

PyObject* events_of(const Span& span) {
  if (span.events_size() == 0 && span.links_size() == 0) Py_RETURN_NONE;
  Ref events(PyList_New(0)), links(PyList_New(0));
  if (!events.p || !links.p) return nullptr;
  for (const auto& e : span.events()) {
    Ref name(str_of(e.name()));
    Ref attrs(kv_dict(e.attributes(), 0));
    if (!name.p || !attrs.p) return nullptr;
    Ref item(Py_BuildValue("{s:O,s:K,s:O}", "name", name.p, "time_ms",
                           static_cast<unsigned long long>(e.time_unix_nano() / 1000000ULL), "attributes", attrs.p));
    if (!item.p || PyList_Append(events.p, item.p) < 0) return nullptr;
  }
  for (const auto& ln : span.links()) {
    Ref tid(bytes_of(ln.trace_id().data(), ln.trace_id().size()));
    Ref sid(bytes_of(ln.span_id().data(), ln.span_id().size()));
    Ref tid_hex(tid.p ? PyObject_CallMethod(tid.p, "hex", nullptr) : nullptr);
    Ref sid_hex(sid.p ? PyObject_CallMethod(sid.p, "hex", nullptr) : nullptr);
    if (!tid_hex.p || !sid_hex.p) return nullptr;
    Ref item(Py_BuildValue("{s:O,s:O}", "trace_id", tid_hex.p, "span_id", sid_hex.p));
    if (!item.p || PyList_Append(links.p, item.p) < 0) return nullptr;
  }
  return Py_BuildValue("{s:O,s:O}", "events", events.p, "links", links.p);
}

PyObject* span_tuple(const Span& span, size_t ordinal, const std::vector<DocAttr>& doc_attrs,
                     const std::vector<const KeyValue*>& others) {
  Ref other(PyDict_New());
  if (!other.p) return nullptr;
  for (const KeyValue* kv : others) {
    Ref key(str_of(kv->key()));
    Ref val(key.p ? any_value(kv->value(), 0) : nullptr);
    if (!val.p || PyDict_SetItem(other.p, key.p, val.p) < 0) return nullptr;
  }
  Ref events(events_of(span));
  Ref name(str_of(span.name()));
  Ref message(str_of(span.status().message()));
  Ref ord(!doc_attrs.empty() ? PyLong_FromSize_t(ordinal) : Py_NewRef(Py_None));
  if (!events.p || !name.p || !message.p || !ord.p) return nullptr;
  const auto& tid = span.trace_id();
  const auto& sid = span.span_id();
  const auto& parent = span.parent_span_id();
  return Py_BuildValue("(y#y#y#OKKiOOOOI)", tid.data(), static_cast<Py_ssize_t>(tid.size()), sid.data(),
                       static_cast<Py_ssize_t>(sid.size()), parent.data(), static_cast<Py_ssize_t>(parent.size()),
                       name.p, static_cast<unsigned long long>(span.start_time_unix_nano()),
                       static_cast<unsigned long long>(span.end_time_unix_nano()),
                       static_cast<int>(span.status().code()), message.p, events.p, other.p, ord.p,
                       static_cast<unsigned int>(span.dropped_attributes_count()));
}

PyObject* request_spans(Request* self, PyObject*) {
  Ref out(PyList_New(0));
  if (!out.p) return nullptr;
  size_t ordinal = 0;
  for (const auto& rs : self->message->resource_spans()) {
    Ref resource(kv_dict(rs.resource().attributes(), 0));
    Ref spans(PyList_New(0));
    if (!resource.p || !spans.p) return nullptr;
    for (const auto& ss : rs.scope_spans()) {
      for (const Span& span : ss.spans()) {
        Ref t(span_tuple(span, ordinal, (*self->docs)[ordinal], (*self->others)[ordinal]));
        ++ordinal;
        if (!t.p || PyList_Append(spans.p, t.p) < 0) return nullptr;
      }
    }
    Ref group(PyTuple_Pack(2, resource.p, spans.p));
    if (!group.p || PyList_Append(out.p, group.p) < 0) return nullptr;
  }
  return out.release();
}

struct PlanItem {
  const std::vector<DocAttr>* attrs;  // a span's document attributes, or a GenAI list's
  std::string_view trace_id, span_id;
  long long start_ms;
  std::optional<long long> top_k;
  bool truncating;
};

// A GenAI document list ([(id, score_or_None, content_or_None, metadata_or_None), ...], rank =
// index, stage g_gen_ai_stage) as the document attributes it stands for, so that span_documents()
// makes its rows like any other's. The values live in `values` (a deque: they do not move).
bool gen_ai_attrs(PyObject* listed, std::deque<AnyValue>* values, std::vector<DocAttr>* attrs) {
  if (!PyList_Check(listed)) {
    PyErr_SetString(PyExc_TypeError, "documents(): a plan item's documents are a span ordinal or a list");
    return false;
  }
  for (Py_ssize_t rank = 0; rank < PyList_GET_SIZE(listed); ++rank) {
    PyObject *id, *score, *content, *meta;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(listed, rank), "UOOO", &id, &score, &content, &meta)) return false;
    if (rank > g_max_rank) break;
    long long slot = (static_cast<long long>(g_gen_ai_stage) << 24) + rank;
    auto text = [&](PyObject* s, int code) {
      if (s == Py_None) return true;  // no such field
      Py_ssize_t n;
      const char* p = PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &n) : nullptr;
      if (!p) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "documents(): GenAI document fields are str or None");
        return false;
      }
      AnyValue& v = values->emplace_back();
      v.set_string_value(p, static_cast<size_t>(n));
      attrs->push_back({&v, slot, code});
      return true;
    };
    if (!text(id, F_ID)) return false;
    AnyValue& v = values->emplace_back();  // a score that is not a number stays unset: no score
    if (score != Py_None) {
      double d = PyFloat_AsDouble(score);
      if (d == -1.0 && PyErr_Occurred()) return false;
      v.set_double_value(d);
    }
    attrs->push_back({&v, slot, F_SCORE});
    if (!text(content, F_CONTENT) || !text(meta, F_META)) return false;
  }
  return true;
}

PyObject* request_documents(Request* self, PyObject* args) {
  PyObject *plan, *tenant, *written;
  if (!PyArg_ParseTuple(args, "O!UO", &PyList_Type, &plan, &tenant, &written)) return nullptr;
  std::vector<PlanItem> items;
  std::deque<AnyValue> listed_values;  // GenAI documents' fields, for this call
  std::deque<std::vector<DocAttr>> listed_attrs;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plan); ++i) {
    PlanItem it;
    PyObject* documents;
    const char *tid, *sid;
    Py_ssize_t tid_n, sid_n;
    PyObject* top_k_obj;
    int truncating;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(plan, i), "Os#s#LOp", &documents, &tid, &tid_n, &sid, &sid_n,
                          &it.start_ms, &top_k_obj, &truncating))
      return nullptr;
    if (PyLong_Check(documents)) {
      Py_ssize_t ordinal = PyLong_AsSsize_t(documents);
      if (ordinal == -1 && PyErr_Occurred()) return nullptr;
      if (ordinal < 0 || static_cast<size_t>(ordinal) >= self->spans->size()) {
        PyErr_SetString(PyExc_IndexError, "span ordinal out of range");
        return nullptr;
      }
      it.attrs = &(*self->docs)[ordinal];
    } else {
      if (!gen_ai_attrs(documents, &listed_values, &listed_attrs.emplace_back())) return nullptr;
      it.attrs = &listed_attrs.back();
    }
    if (top_k_obj != Py_None) {
      it.top_k = PyLong_AsLongLong(top_k_obj);
      if (*it.top_k == -1 && PyErr_Occurred()) return nullptr;
    }
    it.trace_id = std::string_view(tid, tid_n);  // the plan (and its strings) outlive this call
    it.span_id = std::string_view(sid, sid_n);
    it.truncating = truncating;
    items.push_back(it);
  }
  // What the store has, asked once per distinct hash while the GIL is held; then the rows are
  // built without it (other threads parse and serve meanwhile). Values that need Python (a
  // number as an id, a score spelled as text, a passage to hash) send the request through the
  // same code again with the GIL held.
  std::unordered_map<std::string_view, long long> known_lengths;
  Owned hash_texts;  // hashes sent as other types than string, as text (outlives both passes)
  PyAccess with_gil{true};
  for (const PlanItem& it : items) {
    for (const DocAttr& a : *it.attrs) {
      if (a.code != F_HASH) continue;
      std::string_view hash;
      if (!as_text(*a.value, &hash_texts, &hash, &with_gil)) return nullptr;
      if (known_lengths.count(hash)) continue;
      bool err = false;
      long long n = known_length(written, tenant, hash, &err);
      if (err) return nullptr;
      known_lengths.emplace(hash, n);
    }
  }
  auto build = [&](Output* o) {
    for (const PlanItem& it : items)
      if (!span_documents(*it.attrs, it.trace_id, it.span_id, it.start_ms, it.top_k, it.truncating, o))
        return false;
    return true;
  };
  auto o = std::make_unique<Output>();
  o->py.python = false;
  o->known_lengths = &known_lengths;
  bool built;
  Py_BEGIN_ALLOW_THREADS built = build(o.get());
  Py_END_ALLOW_THREADS
  if (!built) {
    if (!o->py.needs_python) return nullptr;  // an error with the exception set (cannot happen without Python)
    o = std::make_unique<Output>();  // again, holding the GIL
    o->known_lengths = &known_lengths;
    if (!build(o.get())) return nullptr;
  }
  if (o->doc_id.data.size() > INT32_MAX || o->p_content.data.size() > INT32_MAX || o->trace_id.data.size() > INT32_MAX) {
    PyErr_SetString(g_error, "request too large for 32-bit Arrow offsets");
    return nullptr;
  }
  Ref docs(Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "trace_id", str_col(o->trace_id), "span_id",
                         str_col(o->span_id), "stage", str_col(o->stage), "rank", num_col("i64", o->rank), "doc_id",
                         str_col(o->doc_id), "score", num_col("f64", o->score), "content_hash", str_col(o->content_hash),
                         "metadata", str_col(o->metadata), "top_k", num_col("i64", o->top_k), "start_time",
                         num_col("ts", o->start_time)));
  Ref passages(Py_BuildValue("{s:N,s:N,s:N,s:N}", "content_hash", str_col(o->p_hash), "content", str_col(o->p_content),
                             "content_length", num_col("i64", o->p_length), "truncated",
                             num_col("bool", o->p_truncated)));
  if (!docs.p || !passages.p) return nullptr;
  return Py_BuildValue("(OOL)", docs.p, passages.p, o->nbytes);
}

// Whether `text` (UTF-8) hashes to the hex sha256 `claimed`: hashlib over a view of the bytes, so
// the check costs no copy and no decode (the GIL is held). -1 with an error set on failure.
int sha256_is(std::string_view text, std::string_view claimed) {
  static PyObject* sha256 = nullptr;
  if (!sha256) {
    Ref hashlib(PyImport_ImportModule("hashlib"));
    if (!hashlib.p) return -1;
    sha256 = PyObject_GetAttrString(hashlib.p, "sha256");  // kept for the process's lifetime
    if (!sha256) return -1;
  }
  if (claimed.size() != 64) return 0;
  Ref view(PyMemoryView_FromMemory(const_cast<char*>(text.data()), static_cast<Py_ssize_t>(text.size()), PyBUF_READ));
  Ref h(view.p ? PyObject_CallOneArg(sha256, view.p) : nullptr);
  Ref hex(h.p ? PyObject_CallMethod(h.p, "hexdigest", nullptr) : nullptr);
  if (!hex.p) return -1;
  Py_ssize_t n;
  const char* p = PyUnicode_AsUTF8AndSize(hex.p, &n);
  if (!p) return -1;
  return std::string_view(p, static_cast<size_t>(n)) == claimed;
}

// Texts proven to hash to their content hash, across requests, per tenant: production sends the
// same passages again and again (a corpus is retrieved from many times), so a passage checked once
// is compared byte for byte with the text it was proven with instead of hashed again. Equal bytes
// hash alike, so the check is exactly as strict; a text that differs from the proven one cannot
// hash to the same sha256 and is refused as before. Bounded by `max_bytes` (texts, keys and an
// estimate of the bookkeeping), least recently used first out. Guarded by the GIL: verify() holds
// it, except inside hashlib (which lets it go for long texts), and no pointer into the cache is
// kept across that call.
struct VerifiedTexts {
  struct Entry {
    std::string text;
    std::list<std::string>::iterator key;  // its node in `order`, which owns the key's bytes
  };
  std::list<std::string> order;                        // keys (tenant \0 hash), least recently used first
  std::unordered_map<std::string_view, Entry> by_key;  // keys are views of `order`'s strings
  size_t bytes = 0, max_bytes = 0;
  unsigned long long hits = 0, hashed = 0;
  std::string probe;  // the key being looked up (reused: no allocation per lookup)

  static size_t cost(size_t key, size_t text) { return key + text + 160; }  // + list node, map node

  std::string_view key_of(std::string_view tenant, std::string_view hash) {
    probe.assign(tenant);
    probe.push_back('\0');
    probe.append(hash);
    return probe;
  }
  // The proven text of `hash` for `tenant`, or nullptr; a hit becomes the most recently used.
  const std::string* find(std::string_view tenant, std::string_view hash) {
    auto it = by_key.find(key_of(tenant, hash));
    if (it == by_key.end()) return nullptr;
    order.splice(order.end(), order, it->second.key);
    return &it->second.text;
  }
  void add(std::string_view tenant, std::string_view hash, std::string_view text) {
    std::string_view key = key_of(tenant, hash);
    size_t c = cost(key.size(), text.size());
    if (c > max_bytes / 4 || by_key.count(key)) return;  // no one text takes over the cache
    while (bytes + c > max_bytes && !order.empty()) {
      auto oldest = by_key.find(std::string_view(order.front()));
      bytes -= cost(order.front().size(), oldest->second.text.size());
      by_key.erase(oldest);
      order.pop_front();
    }
    order.emplace_back(key);
    by_key.emplace(std::string_view(order.back()), Entry{std::string(text), std::prev(order.end())});
    bytes += c;
  }
  void reset(size_t limit) {
    by_key.clear();
    order.clear();
    bytes = 0;
    max_bytes = limit;
    hits = hashed = 0;
  }
};
VerifiedTexts g_verified;

// Whether a span's documents may be stored (the GIL is held): every document with text and a
// claimed content hash (hex sha256 of the UTF-8 text, as the SDK computes it) must hash to it, else
// the span is rejected (`spans.HASH_MISMATCH`): the store keeps one text per hash, so an unchecked
// claim would let any sender replace another's passage. A hash checked once in this request, or proven for this tenant in
// an earlier one (`g_verified`), is compared with the text it was proven with, not hashed again.
PyObject* request_verify(Request* self, PyObject* args) {
  Py_ssize_t ordinal;
  const char* tenant_p = "";
  Py_ssize_t tenant_n = 0;
  if (!PyArg_ParseTuple(args, "n|s#", &ordinal, &tenant_p, &tenant_n)) return nullptr;
  std::string_view tenant(tenant_p, static_cast<size_t>(tenant_n));
  if (ordinal < 0 || static_cast<size_t>(ordinal) >= self->spans->size()) {
    PyErr_SetString(PyExc_IndexError, "span ordinal out of range");
    return nullptr;
  }
  PyAccess py{true};
  SpanDocuments d;
  // views into the message, or into verify_owned (values of other types as text): both live as
  // long as the request, so `verified` can keep them
  if (!read_documents((*self->docs)[ordinal], self->verify_owned, &d, &py)) return nullptr;
  for (size_t i = 0; i < d.hashes.size(); ++i) {
    std::string_view chash = d.hashes.values[i];
    const AnyValue* const* ref = d.contents.get(d.hashes.slots[i]);
    if (chash.empty() || !ref) continue;
    std::string_view content;
    if (!as_text(**ref, self->verify_owned, &content, &py)) return nullptr;
    if (content.empty()) continue;
    auto known = self->verified->find(chash);
    if (known != self->verified->end()) {
      if (known->second != content) Py_RETURN_FALSE;
      continue;
    }
    if (const std::string* proven = g_verified.find(tenant, chash)) {
      if (*proven != content) Py_RETURN_FALSE;  // not the text that hashes to it: cannot hash to it
      ++g_verified.hits;
    } else {
      int same = sha256_is(content, chash);
      if (same < 0) return nullptr;
      if (!same) Py_RETURN_FALSE;
      ++g_verified.hashed;
      g_verified.add(tenant, chash, content);
    }
    self->verified->emplace(chash, content);
  }
  Py_RETURN_TRUE;
}

PyMethodDef request_methods[] = {
    {"verify", reinterpret_cast<PyCFunction>(request_verify), METH_VARARGS,
     "verify(ordinal, tenant='') -> whether every claimed content hash of that span's documents is its text's"},
    {"spans", reinterpret_cast<PyCFunction>(request_spans), METH_NOARGS,
     "[(resource attributes, [span tuple, ...]), ...] (see otlp_walk.cc)"},
    {"documents", reinterpret_cast<PyCFunction>(request_documents), METH_VARARGS,
     "documents(plan, tenant, written) -> (documents columns, passages columns, nbytes)"},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject RequestType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* parse(PyObject*, PyObject* arg) {
  if (g_prefixes.empty()) {
    PyErr_SetString(PyExc_RuntimeError, "_otlp_native.configure() was not called");
    return nullptr;
  }
  Py_buffer buf;
  if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return nullptr;
  // One arena per request (one allocation per block, not per string and message), its first
  // block reused from earlier requests; the messages of a body take about a quarter of its size.
  Block block = take_block(static_cast<size_t>(buf.len) / 2 + 4096);
  google::protobuf::ArenaOptions options;
  options.initial_block = block.data;
  options.initial_block_size = block.size;
  options.max_block_size = 16 << 20;
  auto* arena = new google::protobuf::Arena(options);
  auto* message = google::protobuf::Arena::CreateMessage<ExportTraceServiceRequest>(arena);
  auto* spans = new std::vector<const Span*>();
  auto* docs = new std::vector<std::vector<DocAttr>>();
  auto* others = new std::vector<std::vector<const KeyValue*>>();
  bool parsed = false;
  if (buf.len <= INT32_MAX) {
    // Parsing and sorting attributes into document fields and the rest need no Python objects.
    Py_BEGIN_ALLOW_THREADS parsed = message->ParseFromArray(buf.buf, static_cast<int>(buf.len));
    if (parsed) {
      for (const auto& rs : message->resource_spans())
        for (const auto& ss : rs.scope_spans())
          for (const Span& span : ss.spans()) {
            spans->push_back(&span);
            auto& doc_attrs = docs->emplace_back();
            auto& other = others->emplace_back();
            for (const KeyValue& kv : span.attributes()) {
              long long slot;
              int code;
              if (document_key(kv.key(), &slot, &code))
                doc_attrs.push_back({&kv.value(), slot, code});
              else
                other.push_back(&kv);
            }
          }
    }
    Py_END_ALLOW_THREADS
  }
  PyBuffer_Release(&buf);
  Request* self = parsed ? PyObject_New(Request, &RequestType) : nullptr;
  if (!self) {
    delete spans;
    delete docs;
    delete others;
    delete arena;
    give_block(block);
    if (!parsed) PyErr_SetString(g_error, "not a valid OTLP ExportTraceServiceRequest");
    return nullptr;
  }
  self->arena = arena;
  self->block = block;
  self->message = message;
  self->spans = spans;
  self->docs = docs;
  self->others = others;
  self->verified = new std::unordered_map<std::string_view, std::string_view>();
  self->verify_owned = new Owned();
  return reinterpret_cast<PyObject*>(self);
}

PyObject* configure(PyObject*, PyObject* args) {
  PyObject *prefixes, *stages, *fields, *to_text, *digest;
  long long max_rank;
  int reranked, gen_ai;
  if (!PyArg_ParseTuple(args, "O!O!O!LiiOO", &PyTuple_Type, &prefixes, &PyTuple_Type, &stages, &PyTuple_Type, &fields,
                        &max_rank, &reranked, &gen_ai, &to_text, &digest))
    return nullptr;
  std::vector<std::string> lists[3];
  PyObject* tuples[3] = {prefixes, stages, fields};
  for (int t = 0; t < 3; ++t) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuples[t]); ++i) {
      Py_ssize_t n;
      const char* s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(tuples[t], i), &n);
      if (!s) return nullptr;
      lists[t].emplace_back(s, n);
    }
  }
  int n_stages = static_cast<int>(lists[1].size());
  if (lists[0].size() != lists[1].size() || lists[2].size() != 5 || reranked < 0 || reranked >= n_stages ||
      gen_ai < 0 || gen_ai >= n_stages || max_rank < 0 || max_rank >= (1LL << 24)) {
    PyErr_SetString(PyExc_ValueError, "configure(): prefixes and stages must align; five document fields; stage "
                                      "indexes in range; ranks below 2^24");
    return nullptr;
  }
  g_prefixes = lists[0];
  g_stages = lists[1];
  g_fields = lists[2];
  g_max_rank = max_rank;
  g_reranked_stage = reranked;
  g_gen_ai_stage = gen_ai;
  Py_INCREF(to_text);
  Py_XSETREF(g_to_text, to_text);
  Py_INCREF(digest);
  Py_XSETREF(g_digest, digest);
  Py_RETURN_NONE;
}

PyObject* verified_cache(PyObject*, PyObject* arg) {
  Py_ssize_t n = PyLong_AsSsize_t(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "verified_cache(max_bytes): max_bytes must be >= 0");
    return nullptr;
  }
  g_verified.reset(static_cast<size_t>(n));
  Py_RETURN_NONE;
}

PyObject* verified_cache_stats(PyObject*, PyObject*) {
  return Py_BuildValue("(nnKK)", static_cast<Py_ssize_t>(g_verified.by_key.size()),
                       static_cast<Py_ssize_t>(g_verified.bytes), g_verified.hits, g_verified.hashed);
}

PyMethodDef methods[] = {
    {"verified_cache", verified_cache, METH_O,
     "verified_cache(max_bytes): empty the texts proven to hash to their content hash and bound them (0: none)"},
    {"verified_cache_stats", verified_cache_stats, METH_NOARGS,
     "(entries, bytes, texts compared with a proven one, texts hashed) since verified_cache()"},
    {"parse", parse, METH_O, "Parse an OTLP ExportTraceServiceRequest body (ParseError if invalid)."},
    {"configure", configure, METH_VARARGS,
     "configure(prefixes, stages, fields, max_rank, reranked_stage, gen_ai_stage, to_text, digest): the document "
     "attribute names and limits (from ragtrace.semconv and ragtrace_collector.documents)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_otlp_native", "Compiled OTLP walk (see otlp_walk.cc).", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__otlp_native() {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  // Malformed requests are ordinary input here; they get a 400, not a line on stderr each.
  google::protobuf::SetLogHandler(nullptr);
  RequestType.tp_name = "_otlp_native.Request";
  RequestType.tp_basicsize = sizeof(Request);
  RequestType.tp_dealloc = reinterpret_cast<destructor>(request_dealloc);
  RequestType.tp_flags = Py_TPFLAGS_DEFAULT;
  RequestType.tp_doc = "A parsed ExportTraceServiceRequest (arena-allocated).";
  RequestType.tp_methods = request_methods;
  if (PyType_Ready(&RequestType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module);
  if (!m) return nullptr;
  g_error = PyErr_NewException("_otlp_native.ParseError", PyExc_ValueError, nullptr);
  if (!g_error || PyModule_AddObjectRef(m, "ParseError", g_error) < 0 ||
      PyModule_AddIntConstant(m, "INTERFACE", kInterface) < 0 ||
      PyModule_AddObjectRef(m, "Request", reinterpret_cast<PyObject*>(&RequestType)) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
