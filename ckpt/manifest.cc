// The manifest's JSON form. Layout (docs/checkpoint-format.md): small
// objects for the header, the arrays and the shards, one line each, and the
// chunks of a dataset as compact tuples [rank, first_row, rows, dataset_row,
// "xxh3"], because a job of 16,384 ranks has about a million of them.
//
// Writing builds the text directly. Parsing goes through nlohmann's SAX
// interface: everything but the chunk lists becomes a small DOM (easy to
// check field by field with good paths), while the chunk tuples go straight
// into Chunk structs (a DOM value per tuple field would make parsing several
// times slower). All checks that do not depend on JSON (tiling, overflow,
// ranks) are in CheckManifest, shared by the writer and the parser.
//
// Every parse failure is Code::kCorruption (a manifest on disk that is not
// what baton writes is a corrupt version, whatever is wrong with it), except
// a newer format, kInvalidArgument (not damaged, only unreadable by this
// baton); the writer reports the same checks as kInvalidArgument (a
// caller's bug).
#include "ckpt/manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "ckpt/base64.h"
#include "ckpt/checksum.h"
#include "ckpt/manifest_index.h"
#include "ckpt/run.h"

namespace baton::ckpt {

namespace {

using json = nlohmann::json;

constexpr const char* kChunkFields[5] = {"rank", "first_row", "rows", "dataset_row", "xxh3"};
constexpr const char* kChunkForm = "[rank, first_row, rows, dataset_row, \"xxh3\"]";
// Deeper JSON than this is not a manifest (its deepest value is at 7).
constexpr size_t kMaxDepth = 16;
// Values quoted in messages are cut here: hostile input may be huge.
constexpr size_t kMaxQuoted = 64;

Status Fail(Code code, const std::string& path, const std::string& what) {
  std::string msg = "manifest " + path + ": " + what;
  return code == Code::kCorruption ? Status::Corruption("ckpt", msg) : Status::InvalidArgument("ckpt", msg);
}

std::string Quote(std::string_view s) {
  std::string q = json(std::string(s.substr(0, kMaxQuoted))).dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > kMaxQuoted) q += "...";
  return q;
}

std::string Describe(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::binary: return "an array";
    case json::value_t::string: return Quote(j.get_ref<const std::string&>());
    default: return j.dump();
  }
}

std::string Idx(const std::string& base, const char* key, size_t i) {
  return base + (base.empty() ? "" : ".") + key + "[" + std::to_string(i) + "]";
}
std::string Field(const std::string& base, const char* key) { return base.empty() ? key : base + "." + key; }

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* r) { return __builtin_mul_overflow(a, b, r); }
bool AddOverflows(uint64_t a, uint64_t b, uint64_t* r) { return __builtin_add_overflow(a, b, r); }

// ---- field access on the DOM part -------------------------------------------

// The object at path must have exactly `keys`.
Status CheckKeys(const json& j, const std::string& path, std::initializer_list<const char*> keys) {
  if (!j.is_object()) return Fail(Code::kCorruption, path.empty() ? "(top level)" : path, "expected an object, got " + Describe(j));
  for (const auto& item : j.items()) {
    if (std::find_if(keys.begin(), keys.end(), [&](const char* k) { return item.key() == k; }) == keys.end()) {
      return Fail(Code::kCorruption, Field(path, item.key().c_str()), "unknown key");
    }
  }
  for (const char* k : keys) {
    if (!j.contains(k)) return Fail(Code::kCorruption, Field(path, k), "missing");
  }
  return Status::OK();
}

// A signed number where an unsigned one belongs; "-0" (parsed as 0) is
// worded as what it is, not as "0 is negative".
std::string NegativeText(int64_t v) {
  return v == 0 ? "-0 is not an unsigned integer (a minus sign)" : std::to_string(v) + " is negative";
}

Status GetU64Value(const json& j, const std::string& path, uint64_t max, uint64_t* v) {
  if (j.is_number_unsigned()) {
    *v = j.get<uint64_t>();
    if (*v > max) return Fail(Code::kCorruption, path, std::to_string(*v) + " is more than " + std::to_string(max));
    return Status::OK();
  }
  if (j.is_number_integer()) return Fail(Code::kCorruption, path, NegativeText(j.get<int64_t>()));
  if (j.is_number_float()) return Fail(Code::kCorruption, path, j.dump() + " is not an unsigned 64-bit integer");
  return Fail(Code::kCorruption, path, "expected an unsigned integer, got " + Describe(j));
}

Status GetU64(const json& obj, const std::string& base, const char* key, uint64_t max, uint64_t* v) {
  const json& j = obj.at(key);
  if (j.is_number_unsigned() && j.get<uint64_t>() <= max) {
    *v = j.get<uint64_t>();
    return Status::OK();
  }
  return GetU64Value(j, Field(base, key), max, v);
}

Status GetInt(const json& obj, const std::string& base, const char* key, int* v) {
  uint64_t u = 0;
  BATON_RETURN_IF_ERROR(GetU64(obj, base, key, INT_MAX, &u));
  *v = static_cast<int>(u);
  return Status::OK();
}

Status GetString(const json& obj, const std::string& base, const char* key, std::string* v) {
  const json& j = obj.at(key);
  if (!j.is_string()) return Fail(Code::kCorruption, Field(base, key), "expected a string, got " + Describe(j));
  *v = j.get<std::string>();
  return Status::OK();
}

Status GetArray(const json& obj, const std::string& base, const char* key, const json** v) {
  const json& j = obj.at(key);
  if (!j.is_array()) return Fail(Code::kCorruption, Field(base, key), "expected an array, got " + Describe(j));
  *v = &j;
  return Status::OK();
}

// ---- SAX: a DOM for all but the chunk lists ---------------------------------

class ManifestSax : public nlohmann::json_sax<json> {
 public:
  // index_doc: a shard index ({"datasets": [{"chunks": ...}]}) of shards[shard].
  explicit ManifestSax(bool index_doc = false, size_t shard = 0, uint64_t max_values = kAnyNumberOfValues)
      : index_doc_(index_doc), max_values_(max_values), shard_(shard) {}
  json root;
  // The chunk lists, in order of appearance; the DOM holds a binary value
  // whose subtype is the index here where the list was.
  std::vector<std::vector<Chunk>> chunk_lists;
  Status error;

  bool null() override { return Value(nullptr, "null"); }
  bool boolean(bool b) override { return Value(b, b ? "true" : "false"); }
  bool number_integer(number_integer_t v) override {
    if (chunk_depth_ == 2) return ChunkError(NegativeText(v));
    return Value(v, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (chunk_depth_ == 2) return ChunkNumber(v);
    return Value(v, std::to_string(v));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    if (chunk_depth_ == 2) return ChunkError(text + " is not an unsigned 64-bit integer");
    return Value(v, text);
  }
  bool string(string_t& s) override {
    if (chunk_depth_ == 2) {
      if (field_ != 4) return ChunkError("expected a number, got " + Quote(s));
      if (!ParseHexU64(s, &chunk_.xxh3)) return ChunkError(Quote(s) + " is not 16 hex digits");
      ++field_;
      return true;
    }
    return Value(std::move(s), Quote(s));
  }
  bool binary(binary_t& /*b*/) override { return Fail(ValuePath(), "binary values are not JSON"); }

  bool start_object(std::size_t /*n*/) override {
    if (chunk_depth_ > 0) return ChunkError("expected " + std::string(kChunkForm) + ", got an object");
    return StartContainer(json::object());
  }
  bool key(string_t& k) override {
    json* top = stack_.back();
    if (top->contains(k)) return Fail(Field(ContainerPath(), k.c_str()), "duplicate key");
    element_ = &(*top)[k];
    key_ = k;
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*n*/) override {
    if (chunk_depth_ == 1) {
      chunk_depth_ = 2;
      field_ = 0;
      chunk_ = Chunk{};
      return true;
    }
    if (chunk_depth_ == 2) return ChunkError("expected a number, got an array");
    if (IsChunkList()) {
      if (!index_doc_) shard_ = stack_[1]->size() - 1;
      dataset_ = stack_[index_doc_ ? 1 : 3]->size() - 1;
      *element_ = json::binary({}, chunk_lists.size());
      chunk_lists.emplace_back();
      chunk_depth_ = 1;
      return true;
    }
    return StartContainer(json::array());
  }
  bool end_array() override {
    if (chunk_depth_ == 2) {
      if (field_ != 5) return ChunkError("has " + std::to_string(field_) + " fields; a chunk is " + kChunkForm, false);
      chunk_lists.back().push_back(chunk_);
      chunk_depth_ = 1;
      return true;
    }
    if (chunk_depth_ == 1) {
      chunk_depth_ = 0;
      return true;
    }
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool parse_error(std::size_t /*pos*/, const std::string& /*last*/, const nlohmann::detail::exception& e) override {
    error = Status::Corruption("ckpt", std::string("manifest is not valid JSON: ") + e.what());
    return false;
  }

 private:
  // shards[i].datasets[j].chunks (datasets[j].chunks in an index), nowhere else.
  bool IsChunkList() const {
    if (index_doc_) {
      return stack_.size() == 3 && key_ == "chunks" && stack_.back()->is_object() && keys_[1] == "datasets" &&
             stack_[1]->is_array();
    }
    return stack_.size() == 5 && key_ == "chunks" && stack_.back()->is_object() && keys_[1] == "shards" &&
           keys_[3] == "datasets" && stack_[1]->is_array() && stack_[3]->is_array();
  }

  bool Value(json v, const std::string& text) {
    if (chunk_depth_ == 1) return ChunkError("expected " + std::string(kChunkForm) + ", got " + text, false);
    if (chunk_depth_ == 2) return ChunkError("expected a number, got " + text);
    if (!Count()) return false;
    if (stack_.empty()) {
      root = std::move(v);
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
    } else {
      *element_ = std::move(v);
    }
    return true;
  }

  bool StartContainer(json v) {
    if (stack_.size() >= kMaxDepth) return Fail(ValuePath(), "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (!Count()) return false;
    json* p;
    std::string key;
    if (stack_.empty()) {
      root = std::move(v);
      p = &root;
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
      p = &stack_.back()->back();
    } else {
      *element_ = std::move(v);
      p = element_;
      key = key_;
    }
    stack_.push_back(p);
    keys_.push_back(std::move(key));
    return true;
  }

  // Every DOM value costs ~100 bytes (measured in the unit test
  // ManifestValueLimitBoundsMemory), so their count bounds the parse's memory.
  bool Count() {
    if (++values_ <= max_values_) return true;
    return Fail(ValuePath(), "more than " + std::to_string(max_values_) +
                                 " JSON values outside the chunk lists, more than this version's files allow "
                                 "(ManifestValueLimit)");
  }

  bool ChunkNumber(uint64_t v) {
    switch (field_) {
      case 0:
        if (v > INT_MAX) return ChunkError(std::to_string(v) + " is not a rank");
        chunk_.rank = static_cast<int>(v);
        break;
      case 1: chunk_.first_row = v; break;
      case 2: chunk_.rows = v; break;
      case 3: chunk_.dataset_row = v; break;
      default: return ChunkError("expected " + Quote("xxh3") + " hex digits, got " + std::to_string(v));
    }
    ++field_;
    return true;
  }

  // An error inside shards[i].datasets[j].chunks[k], at the current field
  // (or at the chunk itself).
  bool ChunkError(const std::string& what, bool at_field = true) {
    std::string path = "shards[" + std::to_string(shard_) + "].datasets[" + std::to_string(dataset_) + "].chunks[" +
                       std::to_string(chunk_lists.back().size()) + "]";
    if (at_field && chunk_depth_ == 2) {
      if (field_ < 5) path += std::string(".") + kChunkFields[field_];
      else return Fail(path, "more than 5 fields; a chunk is " + std::string(kChunkForm));
    }
    return Fail(path, what);
  }

  // The JSON path of the innermost open object or array ("shards[3]").
  std::string ContainerPath() const {
    std::string p;
    for (size_t i = 1; i < stack_.size(); ++i) {
      if (!keys_[i].empty()) {
        p = Field(p, keys_[i].c_str());
      } else {
        p += "[" + std::to_string(stack_[i - 1]->size() - 1) + "]";
      }
    }
    return p;
  }
  // The JSON path of the value being parsed ("shards[3].file").
  std::string ValuePath() const {
    if (stack_.empty()) return "";
    if (stack_.back()->is_object()) return Field(ContainerPath(), key_.c_str());
    return ContainerPath() + "[" + std::to_string(stack_.back()->size()) + "]";
  }

  bool Fail(const std::string& path, const std::string& what) {
    error = ::baton::ckpt::Fail(Code::kCorruption, path.empty() ? "(top level)" : path, what);
    return false;
  }

  const bool index_doc_;
  const uint64_t max_values_;
  uint64_t values_ = 0;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // the key of each stack entry ("" in an array or at the top)
  json* element_ = nullptr;        // the member the next value goes into, in an object
  std::string key_;
  int chunk_depth_ = 0;            // 1: in a chunk list, 2: in a chunk tuple
  int field_ = 0;
  Chunk chunk_;
  size_t shard_ = 0, dataset_ = 0;
};

// The datasets of one shard (formats 1-2: in the manifest; 3: in its index)
// into sh->datasets; the chunk lists come from the SAX pass.
Status ParseDatasets(const json& parent, const std::string& path, int format,
                     const std::unordered_map<std::string, uint32_t>& index, ManifestSax* sax, ShardMeta* sh) {
  const json* datasets = nullptr;
  BATON_RETURN_IF_ERROR(GetArray(parent, path, "datasets", &datasets));
  sh->datasets.resize(datasets->size());
  for (size_t d = 0; d < datasets->size(); ++d) {
    const json& dj = (*datasets)[d];
    const std::string dpath = Idx(path, "datasets", d);
    DatasetMeta& ds = sh->datasets[d];
    if (format == 1) {
      BATON_RETURN_IF_ERROR(CheckKeys(dj, dpath, {"array", "rows", "chunks"}));
    } else {
      BATON_RETURN_IF_ERROR(CheckKeys(dj, dpath, {"array", "rows", "offset", "chunks"}));
      BATON_RETURN_IF_ERROR(GetU64(dj, dpath, "offset", UINT64_MAX, &ds.offset));
    }
    const json& name = dj["array"];
    if (!name.is_string()) return Fail(Code::kCorruption, Field(dpath, "array"), "expected an array name, got " + Describe(name));
    auto it = index.find(name.get_ref<const std::string&>());
    if (it == index.end()) return Fail(Code::kCorruption, Field(dpath, "array"), Describe(name) + " names no array");
    ds.array = it->second;
    BATON_RETURN_IF_ERROR(GetU64(dj, dpath, "rows", UINT64_MAX, &ds.rows));
    const json& chunks = dj["chunks"];
    if (!chunks.is_binary() || !chunks.get_binary().has_subtype() ||
        chunks.get_binary().subtype() >= sax->chunk_lists.size()) {
      return Fail(Code::kCorruption, Field(dpath, "chunks"), std::string("expected an array of ") + kChunkForm + ", got " + Describe(chunks));
    }
    ds.chunks = std::move(sax->chunk_lists[chunks.get_binary().subtype()]);
  }
  return Status::OK();
}

// ---- the checks shared by writer and parser -----------------------------------

// The datasets of m.shards[s]: arrays, rows, extents within the file and
// chunks tiling each dataset (pieces: each chunk's rows, for the check
// across shards).
Status CheckShardDatasets(const Manifest& m, size_t s, const std::vector<uint64_t>& row_bytes, Code code,
                          std::vector<std::vector<std::pair<uint64_t, uint64_t>>>* pieces) {
  const ShardMeta& sh = m.shards[s];
  const std::string path = Idx("", "shards", s);
  std::vector<size_t> seen(m.arrays.size(), 0);  // datasets of each array in this shard
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // format 2: [offset, end) of each dataset's data
  for (size_t d = 0; d < sh.datasets.size(); ++d) {
    const DatasetMeta& ds = sh.datasets[d];
    auto dpath_fn = [&] { return Idx(path, "datasets", d); };
    if (ds.array >= m.arrays.size()) {
      return Fail(code, Field(dpath_fn(), "array"), std::to_string(ds.array) + " is not an array index (" +
                                                   std::to_string(m.arrays.size()) + " arrays)");
    }
    const ArrayMeta& am = m.arrays[ds.array];
    if (seen[ds.array]++ > 0) return Fail(code, Field(dpath_fn(), "array"), Quote(am.name) + " has two datasets in this shard");
    uint64_t bytes = 0;
    if (MulOverflows(ds.rows, row_bytes[ds.array], &bytes)) {
      return Fail(code, Field(dpath_fn(), "rows"), std::to_string(ds.rows) + " rows of " + std::to_string(row_bytes[ds.array]) +
                                                  " bytes overflow 64 bits");
    }
    if (ds.rows > am.rows()) {
      return Fail(code, Field(dpath_fn(), "rows"), std::to_string(ds.rows) + " is more than the " + std::to_string(am.rows()) +
                                                  " rows of " + Quote(am.name));
    }
    if (m.format >= 2 && bytes > 0) {
      uint64_t end = 0;
      if (AddOverflows(ds.offset, bytes, &end) || end > sh.bytes) {
        return Fail(code, Field(dpath_fn(), "offset"), std::to_string(ds.offset) + " + " + std::to_string(bytes) +
                                                         " bytes go past the file's " + std::to_string(sh.bytes));
      }
      extents.emplace_back(ds.offset, end);
    }
    uint64_t next = 0;  // the dataset row the next chunk must start at
    for (size_t k = 0; k < ds.chunks.size(); ++k) {
      const Chunk& c = ds.chunks[k];
      // Built only for a message: a million chunks pass through here.
      auto cpath = [&] { return Idx(dpath_fn(), "chunks", k); };
      if (!std::binary_search(sh.ranks.begin(), sh.ranks.end(), c.rank)) {
        return Fail(code, Field(cpath(), "rank"), std::to_string(c.rank) + " is not one of the shard's ranks");
      }
      if (MulOverflows(c.rows, row_bytes[ds.array], &bytes)) {
        return Fail(code, Field(cpath(), "rows"), std::to_string(c.rows) + " rows of " + std::to_string(row_bytes[ds.array]) +
                                                    " bytes overflow 64 bits");
      }
      uint64_t end = 0;
      if (AddOverflows(c.first_row, c.rows, &end) || end > am.rows()) {
        return Fail(code, Field(cpath(), "first_row"), std::to_string(c.first_row) + " + " + std::to_string(c.rows) +
                                                         " rows go past the " + std::to_string(am.rows()) + " rows of " + Quote(am.name));
      }
      if (c.dataset_row != next) {
        return Fail(code, Field(cpath(), "dataset_row"), std::to_string(c.dataset_row) + ", expected " + std::to_string(next) +
                                                           " (chunks tile the dataset in order)");
      }
      if (AddOverflows(next, c.rows, &next) || next > ds.rows) {
        return Fail(code, Field(cpath(), "rows"), std::to_string(c.rows) + " rows go past the dataset's " + std::to_string(ds.rows));
      }
      if (c.rows > 0 && pieces != nullptr) (*pieces)[ds.array].emplace_back(c.first_row, c.rows);
    }
    if (next != ds.rows) {
      return Fail(code, Field(dpath_fn(), "rows"), std::to_string(ds.rows) + ", but its chunks hold " + std::to_string(next));
    }
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) {
      return Fail(code, Field(path, "datasets"), "the data at bytes " + std::to_string(extents[i].first) +
                                                 " overlaps another dataset's");
    }
  }
  return Status::OK();
}

// The header and the arrays; *row_bytes: each array's row size.
Status CheckHeader(const Manifest& m, Code code, std::vector<uint64_t>* row_bytes_out) {
  if (m.format < kOldestManifestFormat || m.format > kManifestFormat) {
    return Fail(code, "format", std::to_string(m.format) + " is not a manifest format this baton reads (it reads " +
                                    std::to_string(kOldestManifestFormat) + " to " + std::to_string(kManifestFormat) +
                                    ")");
  }
  if (m.format >= 2 && !ValidRunId(m.run_id)) {
    return Fail(code, "run_id", Quote(m.run_id) + " is not a run id (1-64 of [A-Za-z0-9._-], not . nor ..)");
  }
  if (m.format == 1 && !m.run_id.empty()) return Fail(code, "run_id", "format 1 has no run id");
  if (m.step < 0) return Fail(code, "step", std::to_string(m.step) + " is negative");
  if (m.step > kMaxStep) {
    return Fail(code, "step", std::to_string(m.step) + " is more than the largest step, " + std::to_string(kMaxStep));
  }
  if (m.world_size < 1) return Fail(code, "world_size", std::to_string(m.world_size) + " is not a world size");
  if (m.group_size < 0) return Fail(code, "group_size", std::to_string(m.group_size) + " is negative");
  if (m.user_blob.size() > kMaxUserBlobBytes) {
    return Fail(code, "user_blob", std::to_string(m.user_blob.size()) + " bytes, more than the limit of " +
                                       std::to_string(kMaxUserBlobBytes));
  }

  std::unordered_map<std::string_view, size_t> names;
  std::vector<uint64_t>& row_bytes = *row_bytes_out;
  row_bytes.assign(m.arrays.size(), 0);
  uint64_t total = 0;
  for (size_t a = 0; a < m.arrays.size(); ++a) {
    const ArrayMeta& am = m.arrays[a];
    const std::string path = Idx("", "arrays", a);
    if (!IsPlainFileName(am.name)) return Fail(code, Field(path, "name"), Quote(am.name) + " is not a plain name");
    if (!names.emplace(am.name, a).second) {
      return Fail(code, Field(path, "name"), Quote(am.name) + " is also arrays[" + std::to_string(names[am.name]) + "]");
    }
    if (am.shape.size() > kMaxDims) {
      return Fail(code, Field(path, "shape"), std::to_string(am.shape.size()) + " dimensions, more than HDF5's " +
                                                std::to_string(kMaxDims));
    }
    uint64_t rb = DTypeSize(am.dtype), bytes = 0;
    for (size_t d = 1; d < am.shape.size(); ++d) {
      if (MulOverflows(rb, am.shape[d], &rb)) return Fail(code, Field(path, "shape"), "a row of this shape overflows 64 bits");
    }
    if (MulOverflows(rb, am.rows(), &bytes)) {
      return Fail(code, Field(path, "shape"), std::to_string(am.rows()) + " rows of " + std::to_string(rb) + " bytes overflow 64 bits");
    }
    if (AddOverflows(total, bytes, &total)) return Fail(code, Field(path, "shape"), "the arrays' bytes together overflow 64 bits");
    row_bytes[a] = rb;
  }
  return Status::OK();
}

Status CheckManifest(const Manifest& m, Code code) {
  std::vector<uint64_t> row_bytes;
  BATON_RETURN_IF_ERROR(CheckHeader(m, code, &row_bytes));
  // Every array's rows, as (first_row, rows) of the chunks that hold them
  // (only when every shard is loaded: the check across shards).
  const bool complete = m.complete();
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> pieces(complete ? m.arrays.size() : 0);
  std::vector<int> all_ranks;
  std::unordered_map<std::string_view, size_t> files;
  for (size_t s = 0; s < m.shards.size(); ++s) {
    const ShardMeta& sh = m.shards[s];
    const std::string path = Idx("", "shards", s);
    if (!IsPlainFileName(sh.file)) {
      return Fail(code, Field(path, "file"), Quote(sh.file) + " is not a plain file name inside the version directory");
    }
    if (!files.emplace(sh.file, s).second) {
      return Fail(code, Field(path, "file"), Quote(sh.file) + " is also shards[" + std::to_string(files[sh.file]) + "]");
    }
    if (m.format >= 3) {
      if (!IsPlainFileName(sh.index) || sh.index == kManifestName) {
        return Fail(code, Field(path, "index.file"), Quote(sh.index) + " is not a plain file name inside the version directory");
      }
      if (!files.emplace(sh.index, s).second) {
        return Fail(code, Field(path, "index.file"), Quote(sh.index) + " is also a file of shards[" + std::to_string(files[sh.index]) + "]");
      }
    } else if (!sh.loaded || !sh.index.empty()) {
      return Fail(code, Field(path, "index"), "format " + std::to_string(m.format) + " has no shard index");
    }
    if (sh.ranks.empty()) return Fail(code, Field(path, "ranks"), "empty");
    for (size_t i = 0; i < sh.ranks.size(); ++i) {
      const int r = sh.ranks[i];
      const std::string rpath = Idx(path, "ranks", i);
      if (r < 0 || r >= m.world_size) {
        return Fail(code, rpath, std::to_string(r) + " is not a rank of world size " + std::to_string(m.world_size));
      }
      if (i > 0 && r <= sh.ranks[i - 1]) return Fail(code, rpath, std::to_string(r) + " is not in ascending order");
      all_ranks.push_back(r);
    }
    if (sh.loaded) BATON_RETURN_IF_ERROR(CheckShardDatasets(m, s, row_bytes, code, complete ? &pieces : nullptr));
  }

  // Every rank in exactly one shard (the shard groups partition the world).
  std::sort(all_ranks.begin(), all_ranks.end());
  for (size_t i = 0; i < all_ranks.size(); ++i) {
    if (i > 0 && all_ranks[i] == all_ranks[i - 1]) {
      return Fail(code, "shards", "rank " + std::to_string(all_ranks[i]) + " is in two shards");
    }
    if (all_ranks[i] != static_cast<int>(i)) return Fail(code, "shards", "rank " + std::to_string(i) + " is in no shard");
  }
  if (all_ranks.size() != static_cast<size_t>(m.world_size)) {
    return Fail(code, "shards", "rank " + std::to_string(all_ranks.size()) + " is in no shard");
  }
  if (!complete) return Status::OK();

  // Every array's rows held by exactly one chunk over all shards (replicated
  // arrays too: their rows are spread over the ranks).
  for (size_t a = 0; a < m.arrays.size(); ++a) {
    auto& p = pieces[a];
    if (!std::is_sorted(p.begin(), p.end())) std::sort(p.begin(), p.end());
    uint64_t next = 0;
    const std::string path = Idx("", "arrays", a) + " (" + Quote(m.arrays[a].name) + ")";
    for (const auto& [first, rows] : p) {
      if (first < next) return Fail(code, path, "row " + std::to_string(first) + " is in two chunks");
      if (first > next) return Fail(code, path, "row " + std::to_string(next) + " is in no chunk");
      next = first + rows;
    }
    if (next != m.arrays[a].rows()) return Fail(code, path, "row " + std::to_string(next) + " is in no chunk");
  }
  return Status::OK();
}

// ---- writing ----------------------------------------------------------------

void AppendU64(std::string* out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendHex(std::string* out, uint64_t v) {
  *out += '"';
  *out += HexU64(v);
  *out += '"';
}

// A JSON string; InvalidArgument for bytes that are not UTF-8 (the parser
// would refuse them).
Status JsonString(const std::string& s, const std::string& path, std::string* out) {
  try {
    *out = json(s).dump();
  } catch (const json::exception&) {
    return Fail(Code::kInvalidArgument, path, Quote(s) + " is not UTF-8");
  }
  return Status::OK();
}

// The datasets of a shard, each on its own line (after `indent`), without
// the enclosing brackets.
void AppendDatasets(std::string* out, const Manifest& m, const ShardMeta& sh, const std::vector<std::string>& names,
                    const char* indent) {
  std::string& o = *out;
  for (size_t d = 0; d < sh.datasets.size(); ++d) {
    const DatasetMeta& ds = sh.datasets[d];
    if (d > 0) o += ',';
    o += indent;
    o += "{\"array\": ";
    o += names[ds.array];
    o += ", \"rows\": ";
    AppendU64(&o, ds.rows);
    if (m.format >= 2) {
      o += ", \"offset\": ";
      AppendU64(&o, ds.offset);
    }
    o += ", \"chunks\": [";
    for (size_t k = 0; k < ds.chunks.size(); ++k) {
      const Chunk& c = ds.chunks[k];
      o += k == 0 ? "[" : ", [";
      AppendU64(&o, static_cast<uint64_t>(c.rank));
      o += ", ";
      AppendU64(&o, c.first_row);
      o += ", ";
      AppendU64(&o, c.rows);
      o += ", ";
      AppendU64(&o, c.dataset_row);
      o += ", ";
      AppendHex(&o, c.xxh3);
      o += ']';
    }
    o += "]}";
  }
}

}  // namespace

uint64_t ArrayMeta::row_bytes() const {
  uint64_t rb = DTypeSize(dtype);
  for (size_t d = 1; d < shape.size(); ++d) {
    if (__builtin_mul_overflow(rb, shape[d], &rb)) return UINT64_MAX;
  }
  return rb;
}

bool Manifest::complete() const {
  return std::all_of(shards.begin(), shards.end(), [](const ShardMeta& s) { return s.loaded; });
}

uint64_t Manifest::total_bytes() const {
  // Every row of every array is in exactly one chunk (CheckManifest), so
  // this is also the sum over the shards' datasets, without needing them.
  uint64_t total = 0;
  for (const ArrayMeta& a : arrays) total += a.rows() * a.row_bytes();
  return total;
}

bool IsPlainFileName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

std::string CanonicalShardFile(size_t group) { return "shard-" + std::to_string(group) + ".h5"; }

namespace {

// ---- format 5's compact shard table ------------------------------------------
//   "shards": {"groups": [[count, ranks], ...], "table": "<base64>"}
// groups: runs of `count` shards of `ranks` consecutive ranks each, from
// rank 0 on; shard g is CanonicalShardFile(g) with its ShardIndexName.
// table: per shard, 32 bytes little-endian: bytes, meta_xxh3, index bytes,
// index xxh3.
constexpr size_t kTableEntryBytes = 32;

// The runs of the shards' rank counts when the shards are the canonical ones
// over consecutive ranks (else false: the list form).
bool CompactGroups(const Manifest& m, std::vector<std::pair<uint64_t, uint64_t>>* runs) {
  runs->clear();
  int next = 0;
  for (size_t s = 0; s < m.shards.size(); ++s) {
    const ShardMeta& sh = m.shards[s];
    if (sh.file != CanonicalShardFile(s) || sh.index != ShardIndexName(sh.file) || sh.ranks.empty()) return false;
    for (int r : sh.ranks) {
      if (r != next++) return false;
    }
    if (!runs->empty() && runs->back().second == sh.ranks.size()) {
      ++runs->back().first;
    } else {
      runs->emplace_back(1, sh.ranks.size());
    }
  }
  return !runs->empty();
}

void AppendLe64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t ReadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void AppendCompactShards(std::string* o, const Manifest& m, const std::vector<std::pair<uint64_t, uint64_t>>& runs) {
  *o += "{\"groups\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    *o += i == 0 ? "[" : ", [";
    AppendU64(o, runs[i].first);
    *o += ", ";
    AppendU64(o, runs[i].second);
    *o += "]";
  }
  std::string table;
  table.reserve(kTableEntryBytes * m.shards.size());
  for (const ShardMeta& sh : m.shards) {
    AppendLe64(&table, sh.bytes);
    AppendLe64(&table, sh.meta_xxh3);
    AppendLe64(&table, sh.index_bytes);
    AppendLe64(&table, sh.index_xxh3);
  }
  *o += "], \"table\": \"";
  *o += Base64Encode(table);
  *o += "\"}";
}

// Allocates in proportion to the text: the table's length must match the
// shards the groups claim before any shard is made.
Status ParseCompactShards(const json& j, Manifest* m) {
  BATON_RETURN_IF_ERROR(CheckKeys(j, "shards", {"groups", "table"}));
  const json* groups = nullptr;
  BATON_RETURN_IF_ERROR(GetArray(j, "shards", "groups", &groups));
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  uint64_t shards = 0, ranks = 0;
  for (size_t i = 0; i < groups->size(); ++i) {
    const json& g = (*groups)[i];
    const std::string path = Idx("shards", "groups", i);
    if (!g.is_array() || g.size() != 2) return Fail(Code::kCorruption, path, "expected [count, ranks], got " + Describe(g));
    uint64_t count = 0, per = 0, run_ranks = 0;
    BATON_RETURN_IF_ERROR(GetU64Value(g[0], path + "[0]", static_cast<uint64_t>(INT_MAX), &count));
    BATON_RETURN_IF_ERROR(GetU64Value(g[1], path + "[1]", static_cast<uint64_t>(INT_MAX), &per));
    if (count == 0 || per == 0) return Fail(Code::kCorruption, path, "a run of no shards or of shards of no ranks");
    if (MulOverflows(count, per, &run_ranks) || AddOverflows(ranks, run_ranks, &ranks) ||
        ranks > static_cast<uint64_t>(m->world_size)) {
      return Fail(Code::kCorruption, path, "more ranks than the world size " + std::to_string(m->world_size));
    }
    shards += count;
    runs.emplace_back(count, per);
  }
  if (ranks != static_cast<uint64_t>(m->world_size)) {
    return Fail(Code::kCorruption, "shards.groups", std::to_string(ranks) + " ranks, but the world size is " +
                                                       std::to_string(m->world_size));
  }
  const json& t = j["table"];
  if (!t.is_string()) return Fail(Code::kCorruption, "shards.table", "expected a string, got " + Describe(t));
  const std::string& b64 = t.get_ref<const std::string&>();
  const uint64_t want = (shards * kTableEntryBytes + 2) / 3 * 4;  // base64 with padding
  if (b64.size() != want) {
    return Fail(Code::kCorruption, "shards.table", std::to_string(b64.size()) + " characters, but " +
                                                       std::to_string(shards) + " shards take " + std::to_string(want));
  }
  std::string table;
  if (!Base64Decode(b64, &table) || table.size() != shards * kTableEntryBytes) {
    return Fail(Code::kCorruption, "shards.table", "is not the base64 of " + std::to_string(shards) + " entries");
  }
  m->shards.resize(static_cast<size_t>(shards));
  size_t s = 0;
  int rank = 0;
  for (const auto& [count, per] : runs) {
    for (uint64_t c = 0; c < count; ++c, ++s) {
      ShardMeta& sh = m->shards[s];
      sh.file = CanonicalShardFile(s);
      sh.index = ShardIndexName(sh.file);
      sh.ranks.resize(static_cast<size_t>(per));
      for (int& r : sh.ranks) r = rank++;
      const char* e = table.data() + s * kTableEntryBytes;
      sh.bytes = ReadLe64(e);
      sh.meta_xxh3 = ReadLe64(e + 8);
      sh.index_bytes = ReadLe64(e + 16);
      sh.index_xxh3 = ReadLe64(e + 24);
      if (sh.index_bytes > kMaxManifestBytes) {
        return Fail(Code::kCorruption, "shards.table[" + std::to_string(s) + "]",
                    "index bytes " + std::to_string(sh.index_bytes) + " exceed " + std::to_string(kMaxManifestBytes));
      }
      sh.loaded = false;  // its datasets are in its index
    }
  }
  return Status::OK();
}

// The single document (top = false: formats 1-2) or the top-level manifest
// of format 3 (top = true: each shard's index instead of its datasets).
Status WriteDocument(const Manifest& m, bool top, std::string* out) {
  if (top != (m.format >= 3)) {
    return Fail(Code::kInvalidArgument, "format", std::to_string(m.format) + (top ? " has no top-level manifest (format 3 and later)" : " is written as a top-level manifest and shard indexes"));
  }
  if (!top && !m.complete()) return Fail(Code::kInvalidArgument, "shards", "not every shard's datasets are loaded");
  BATON_RETURN_IF_ERROR(CheckManifest(m, Code::kInvalidArgument));
  const uint64_t blob_xxh3 = Xxh3(m.user_blob.data(), m.user_blob.size());
  if (m.user_blob_xxh3 != 0 && m.user_blob_xxh3 != blob_xxh3) {
    return Fail(Code::kInvalidArgument, "user_blob.xxh3", HexU64(m.user_blob_xxh3) + ", but the blob's bytes hash to " + HexU64(blob_xxh3));
  }
  std::vector<std::string> names(m.arrays.size());
  for (size_t a = 0; a < m.arrays.size(); ++a) {
    BATON_RETURN_IF_ERROR(JsonString(m.arrays[a].name, Idx("", "arrays", a) + ".name", &names[a]));
  }
  std::string time, version;
  BATON_RETURN_IF_ERROR(JsonString(m.time, "time", &time));
  BATON_RETURN_IF_ERROR(JsonString(m.baton_version, "baton_version", &version));

  size_t chunks = 0;
  for (const ShardMeta& sh : m.shards) {
    for (const DatasetMeta& ds : sh.datasets) chunks += top ? 0 : ds.chunks.size() + 1;
  }
  std::string& o = *out;
  o.clear();
  o.reserve(4096 + 64 * chunks + m.user_blob.size() / 3 * 4 + 64 * m.shards.size());
  o += "{\n  \"format\": ";
  AppendU64(&o, static_cast<uint64_t>(m.format));
  if (m.format >= 2) o += ",\n  \"run_id\": \"" + m.run_id + "\"";  // ValidRunId: nothing to escape
  o += ",\n  \"step\": ";
  AppendU64(&o, static_cast<uint64_t>(m.step));
  o += ",\n  \"world_size\": ";
  AppendU64(&o, static_cast<uint64_t>(m.world_size));
  o += ",\n  \"group_size\": ";
  AppendU64(&o, static_cast<uint64_t>(m.group_size));
  o += ",\n  \"time\": " + time + ",\n  \"baton_version\": " + version + ",\n  \"arrays\": [";
  for (size_t a = 0; a < m.arrays.size(); ++a) {
    const ArrayMeta& am = m.arrays[a];
    o += a == 0 ? "\n    {\"name\": " : ",\n    {\"name\": ";
    o += names[a];
    o += ", \"dtype\": \"";
    o += DTypeName(am.dtype);
    o += "\", \"shape\": [";
    for (size_t d = 0; d < am.shape.size(); ++d) {
      if (d > 0) o += ", ";
      AppendU64(&o, am.shape[d]);
    }
    o += "], \"replicated\": ";
    o += am.replicated ? "true}" : "false}";
  }
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  const bool compact = top && m.format >= kCompactShardsFormat && CompactGroups(m, &runs);
  o += m.arrays.empty() ? "],\n  \"shards\": " : "\n  ],\n  \"shards\": ";
  if (compact) AppendCompactShards(&o, m, runs);
  if (!compact) o += "[";
  std::string file;
  for (size_t s = 0; !compact && s < m.shards.size(); ++s) {
    const ShardMeta& sh = m.shards[s];
    BATON_RETURN_IF_ERROR(JsonString(sh.file, Idx("", "shards", s) + ".file", &file));
    o += s == 0 ? "\n    {\"file\": " : ",\n    {\"file\": ";
    o += file;
    o += ", \"ranks\": [";
    for (size_t i = 0; i < sh.ranks.size(); ++i) {
      if (i > 0) o += ", ";
      AppendU64(&o, static_cast<uint64_t>(sh.ranks[i]));
    }
    o += "], \"bytes\": ";
    AppendU64(&o, sh.bytes);
    if (m.format >= 2) {
      o += ", \"meta_xxh3\": ";
      AppendHex(&o, sh.meta_xxh3);
    }
    if (top) {
      o += ", \"index\": {\"file\": ";
      BATON_RETURN_IF_ERROR(JsonString(sh.index, Idx("", "shards", s) + ".index.file", &file));
      o += file;
      o += ", \"bytes\": ";
      AppendU64(&o, sh.index_bytes);
      o += ", \"xxh3\": ";
      AppendHex(&o, sh.index_xxh3);
      o += "}}";
      continue;
    }
    o += ", \"datasets\": [";
    AppendDatasets(&o, m, sh, names, "\n      ");
    o += sh.datasets.empty() ? "]}" : "\n    ]}";
  }
  o += compact ? ",\n  \"user_blob\": {\"xxh3\": "
       : m.shards.empty() ? "],\n  \"user_blob\": {\"xxh3\": " : "\n  ],\n  \"user_blob\": {\"xxh3\": ";
  AppendHex(&o, blob_xxh3);
  o += ", \"base64\": \"";
  o += Base64Encode(m.user_blob);
  o += "\"}\n}\n";
  if (top && m.format >= kChecksummedFormat) SealManifest(&o);
  return Status::OK();
}

}  // namespace

Status WriteManifestJson(const Manifest& m, std::string* out) { return WriteDocument(m, /*top=*/false, out); }
Status WriteTopManifestJson(const Manifest& m, std::string* out) { return WriteDocument(m, /*top=*/true, out); }

Status WriteShardIndexJson(const Manifest& m, size_t shard, std::string* out) {
  if (m.format < 3) return Fail(Code::kInvalidArgument, "format", std::to_string(m.format) + " has no shard indexes");
  if (shard >= m.shards.size() || !m.shards[shard].loaded) {
    return Fail(Code::kInvalidArgument, Idx("", "shards", shard), "not a loaded shard of " + std::to_string(m.shards.size()));
  }
  std::vector<uint64_t> row_bytes;
  BATON_RETURN_IF_ERROR(CheckHeader(m, Code::kInvalidArgument, &row_bytes));
  BATON_RETURN_IF_ERROR(CheckShardDatasets(m, shard, row_bytes, Code::kInvalidArgument, nullptr));
  const ShardMeta& sh = m.shards[shard];
  std::vector<std::string> names(m.arrays.size());
  for (size_t a = 0; a < m.arrays.size(); ++a) {
    BATON_RETURN_IF_ERROR(JsonString(m.arrays[a].name, Idx("", "arrays", a) + ".name", &names[a]));
  }
  std::string file;
  BATON_RETURN_IF_ERROR(JsonString(sh.file, Idx("", "shards", shard) + ".file", &file));
  size_t chunks = 0;
  for (const DatasetMeta& ds : sh.datasets) chunks += ds.chunks.size() + 1;
  std::string& o = *out;
  o.clear();
  o.reserve(256 + 64 * chunks);
  o += "{\n  \"format\": ";
  AppendU64(&o, static_cast<uint64_t>(m.format));
  if (m.format >= kChecksummedFormat) {  // binds the index to its version's step
    o += ",\n  \"step\": ";
    AppendU64(&o, static_cast<uint64_t>(m.step));
  }
  o += ",\n  \"shard\": ";
  AppendU64(&o, shard);
  o += ",\n  \"file\": " + file + ",\n  \"datasets\": [";
  AppendDatasets(&o, m, sh, names, "\n    ");
  o += sh.datasets.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return Status::OK();
}

namespace {

constexpr std::string_view kSealKey = "\"manifest_xxh3\": \"";
constexpr std::string_view kSealEnd = "\"\n}\n";
constexpr size_t kSealTail = kSealKey.size() + 16 + kSealEnd.size();

// The checksum line of a format-4 manifest: present, last, and the xxh3 of
// every byte before its key.
Status CheckSeal(std::string_view text) {
  if (text.size() < kSealTail + 4 || text.substr(text.size() - kSealEnd.size()) != kSealEnd ||
      text.substr(text.size() - kSealTail, kSealKey.size()) != kSealKey ||
      text.substr(text.size() - kSealTail - 4, 4) != ",\n  ") {
    return Fail(Code::kCorruption, kManifestChecksumKey, "missing, or not the last line as baton writes it");
  }
  uint64_t claimed = 0;
  const std::string_view hex = text.substr(text.size() - kSealTail + kSealKey.size(), 16);
  if (!ParseHexU64(hex, &claimed)) return Fail(Code::kCorruption, kManifestChecksumKey, Quote(hex) + " is not 16 hex digits");
  const uint64_t actual = Xxh3(text.data(), text.size() - kSealTail);
  if (actual != claimed) {
    return Fail(Code::kCorruption, kManifestChecksumKey, HexU64(claimed) + ", but the manifest hashes to " + HexU64(actual) +
                                                             ": it was changed after it was written");
  }
  return Status::OK();
}

// A manifest of a newer format is reported as such (InvalidArgument)
// whatever else in it this baton cannot parse: baton writes "format" as the
// first key, so it is read before the rest is parsed.
Status CheckNotNewer(std::string_view text) {
  size_t i = 0;
  auto ws = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  };
  auto eat = [&](std::string_view t) {
    ws();
    if (text.substr(i, t.size()) != t) return false;
    i += t.size();
    return true;
  };
  if (!eat("{") || !eat("\"format\"") || !eat(":")) return Status::OK();  // the full parse says what is wrong
  ws();
  uint64_t format = 0;
  auto r = std::from_chars(text.data() + i, text.data() + text.size(), format);
  if (r.ec == std::errc() && format > static_cast<uint64_t>(kManifestFormat)) {
    // Every format from 4 on ends with its checksum: one that fails it
    // is a damaged manifest (a flipped bit in "format" too), not a newer one.
    if (!CheckSeal(text).ok()) {
      return Status::Corruption("ckpt", "manifest format " + std::to_string(format) +
                                            " (newer than this baton's " + std::to_string(kManifestFormat) +
                                            ") without a valid manifest_xxh3, which every format from " +
                                            std::to_string(kChecksummedFormat) + " on ends with: a damaged manifest");
    }
    return Status::InvalidArgument("ckpt", "manifest format " + std::to_string(format) +
                                               " was written by a newer baton; this baton reads formats " + std::to_string(kOldestManifestFormat) + " to " +
                                               std::to_string(kManifestFormat) + ": restore with a newer baton");
  }
  return Status::OK();
}

}  // namespace

Status ParseManifestJson(std::string_view text, Manifest* out, uint64_t max_values) {
  BATON_RETURN_IF_ERROR(CheckNotNewer(text));
  ManifestSax sax(/*index_doc=*/false, 0, max_values);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.data(), text.data() + text.size(), &sax);
  } catch (const json::exception& e) {
    return Status::Corruption("ckpt", std::string("manifest is not valid JSON: ") + e.what());
  }
  if (!parsed) {
    return sax.error.ok() ? Status::Corruption("ckpt", "manifest is not valid JSON") : sax.error;
  }
  const json& root = sax.root;
  Manifest m;
  // The format first: a newer layout fails with that, not with its first difference.
  if (!root.is_object()) return Fail(Code::kCorruption, "(top level)", "expected an object, got " + Describe(root));
  if (!root.contains("format")) return Fail(Code::kCorruption, "format", "missing");
  {
    const json& f = root["format"];
    if (!f.is_number_unsigned() || f.get<uint64_t>() < static_cast<uint64_t>(kOldestManifestFormat) ||
        f.get<uint64_t>() > static_cast<uint64_t>(kManifestFormat)) {
      return Fail(Code::kCorruption, "format", Describe(f) + " is not a manifest format this baton reads (it reads " +
                                                   std::to_string(kOldestManifestFormat) + " to " +
                                                   std::to_string(kManifestFormat) + ")");
    }
    m.format = static_cast<int>(f.get<uint64_t>());
  }
  if (m.format >= kChecksummedFormat) {
    // The checksum first: a damaged manifest is reported as such, not by
    // the first field it made wrong.
    BATON_RETURN_IF_ERROR(CheckSeal(text));
    BATON_RETURN_IF_ERROR(CheckKeys(root, "", {"format", "run_id", "step", "world_size", "group_size", "time",
                                               "baton_version", "arrays", "shards", "user_blob", kManifestChecksumKey}));
    BATON_RETURN_IF_ERROR(GetString(root, "", "run_id", &m.run_id));
  } else if (m.format == 1) {
    BATON_RETURN_IF_ERROR(CheckKeys(root, "", {"format", "step", "world_size", "group_size", "time", "baton_version",
                                               "arrays", "shards", "user_blob"}));
  } else {
    BATON_RETURN_IF_ERROR(CheckKeys(root, "", {"format", "run_id", "step", "world_size", "group_size", "time",
                                               "baton_version", "arrays", "shards", "user_blob"}));
    BATON_RETURN_IF_ERROR(GetString(root, "", "run_id", &m.run_id));
  }
  uint64_t step = 0;
  BATON_RETURN_IF_ERROR(GetU64(root, "", "step", static_cast<uint64_t>(kMaxStep), &step));
  m.step = static_cast<int64_t>(step);
  BATON_RETURN_IF_ERROR(GetInt(root, "", "world_size", &m.world_size));
  BATON_RETURN_IF_ERROR(GetInt(root, "", "group_size", &m.group_size));
  BATON_RETURN_IF_ERROR(GetString(root, "", "time", &m.time));
  BATON_RETURN_IF_ERROR(GetString(root, "", "baton_version", &m.baton_version));

  const json* arrays = nullptr;
  BATON_RETURN_IF_ERROR(GetArray(root, "", "arrays", &arrays));
  std::unordered_map<std::string, uint32_t> index;
  m.arrays.resize(arrays->size());
  for (size_t a = 0; a < arrays->size(); ++a) {
    const json& j = (*arrays)[a];
    const std::string path = Idx("", "arrays", a);
    ArrayMeta& am = m.arrays[a];
    BATON_RETURN_IF_ERROR(CheckKeys(j, path, {"name", "dtype", "shape", "replicated"}));
    BATON_RETURN_IF_ERROR(GetString(j, path, "name", &am.name));
    std::string dtype;
    BATON_RETURN_IF_ERROR(GetString(j, path, "dtype", &dtype));
    if (!ParseDType(dtype, &am.dtype).ok()) {
      return Fail(Code::kCorruption, Field(path, "dtype"), Quote(dtype) + " is not a dtype (" + DTypeNames() + ")");
    }
    const json* shape = nullptr;
    BATON_RETURN_IF_ERROR(GetArray(j, path, "shape", &shape));
    if (shape->size() > kMaxDims) {
      return Fail(Code::kCorruption, Field(path, "shape"), std::to_string(shape->size()) +
                                                           " dimensions, more than HDF5's " + std::to_string(kMaxDims));
    }
    am.shape.resize(shape->size());
    for (size_t d = 0; d < shape->size(); ++d) {
      BATON_RETURN_IF_ERROR(GetU64Value((*shape)[d], Idx(path, "shape", d), UINT64_MAX, &am.shape[d]));
    }
    const json& rep = j["replicated"];
    if (!rep.is_boolean()) return Fail(Code::kCorruption, Field(path, "replicated"), "expected true or false, got " + Describe(rep));
    am.replicated = rep.get<bool>();
    if (!index.emplace(am.name, static_cast<uint32_t>(a)).second) {
      return Fail(Code::kCorruption, Field(path, "name"), Quote(am.name) + " is also arrays[" + std::to_string(index[am.name]) + "]");
    }
  }

  const json* shards = nullptr;
  if (m.format >= kCompactShardsFormat && root["shards"].is_object()) {
    BATON_RETURN_IF_ERROR(ParseCompactShards(root["shards"], &m));
  } else {
    BATON_RETURN_IF_ERROR(GetArray(root, "", "shards", &shards));
    m.shards.resize(shards->size());
  }
  for (size_t s = 0; shards != nullptr && s < shards->size(); ++s) {
    const json& j = (*shards)[s];
    const std::string path = Idx("", "shards", s);
    ShardMeta& sh = m.shards[s];
    std::string hex;
    if (m.format == 1) {
      BATON_RETURN_IF_ERROR(CheckKeys(j, path, {"file", "ranks", "bytes", "datasets"}));
    } else {
      if (m.format == 2) {
        BATON_RETURN_IF_ERROR(CheckKeys(j, path, {"file", "ranks", "bytes", "meta_xxh3", "datasets"}));
      } else {
        BATON_RETURN_IF_ERROR(CheckKeys(j, path, {"file", "ranks", "bytes", "meta_xxh3", "index"}));
      }
      BATON_RETURN_IF_ERROR(GetString(j, path, "meta_xxh3", &hex));
      if (!ParseHexU64(hex, &sh.meta_xxh3)) {
        return Fail(Code::kCorruption, Field(path, "meta_xxh3"), Quote(hex) + " is not 16 hex digits");
      }
    }
    BATON_RETURN_IF_ERROR(GetString(j, path, "file", &sh.file));
    BATON_RETURN_IF_ERROR(GetU64(j, path, "bytes", UINT64_MAX, &sh.bytes));
    const json* ranks = nullptr;
    BATON_RETURN_IF_ERROR(GetArray(j, path, "ranks", &ranks));
    sh.ranks.resize(ranks->size());
    for (size_t i = 0; i < ranks->size(); ++i) {
      const json& r = (*ranks)[i];
      if (!r.is_number_unsigned() || r.get<uint64_t>() > static_cast<uint64_t>(INT_MAX)) {
        return Fail(Code::kCorruption, Idx(path, "ranks", i), Describe(r) + " is not a rank");
      }
      sh.ranks[i] = static_cast<int>(r.get<uint64_t>());
    }
    if (m.format >= 3) {
      // The datasets are in the shard's index (ParseShardIndexJson).
      sh.loaded = false;
      const json& ij = j["index"];
      const std::string ipath = Field(path, "index");
      BATON_RETURN_IF_ERROR(CheckKeys(ij, ipath, {"file", "bytes", "xxh3"}));
      BATON_RETURN_IF_ERROR(GetString(ij, ipath, "file", &sh.index));
      BATON_RETURN_IF_ERROR(GetU64(ij, ipath, "bytes", kMaxManifestBytes, &sh.index_bytes));
      BATON_RETURN_IF_ERROR(GetString(ij, ipath, "xxh3", &hex));
      if (!ParseHexU64(hex, &sh.index_xxh3)) {
        return Fail(Code::kCorruption, Field(ipath, "xxh3"), Quote(hex) + " is not 16 hex digits");
      }
    } else {
      BATON_RETURN_IF_ERROR(ParseDatasets(j, path, m.format, index, &sax, &sh));
    }
  }

  const json& blob = root["user_blob"];
  BATON_RETURN_IF_ERROR(CheckKeys(blob, "user_blob", {"xxh3", "base64"}));
  std::string hex;
  BATON_RETURN_IF_ERROR(GetString(blob, "user_blob", "xxh3", &hex));
  if (!ParseHexU64(hex, &m.user_blob_xxh3)) return Fail(Code::kCorruption, "user_blob.xxh3", Quote(hex) + " is not 16 hex digits");
  const json& b64j = blob["base64"];
  if (!b64j.is_string()) return Fail(Code::kCorruption, "user_blob.base64", "expected a string, got " + Describe(b64j));
  const std::string& b64 = b64j.get_ref<const std::string&>();
  if (b64.size() / 4 * 3 > kMaxUserBlobBytes + 2) {
    return Fail(Code::kCorruption, "user_blob.base64", std::to_string(b64.size()) + " characters, more than a blob of at most " +
                                                           std::to_string(kMaxUserBlobBytes) + " bytes needs");
  }
  if (!Base64Decode(b64, &m.user_blob)) return Fail(Code::kCorruption, "user_blob.base64", Quote(b64) + " is not base64");
  const uint64_t actual = Xxh3(m.user_blob.data(), m.user_blob.size());
  if (actual != m.user_blob_xxh3) {
    return Fail(Code::kCorruption, "user_blob.xxh3", HexU64(m.user_blob_xxh3) + ", but the blob's bytes hash to " + HexU64(actual));
  }
  BATON_RETURN_IF_ERROR(CheckManifest(m, Code::kCorruption));
  *out = std::move(m);
  return Status::OK();
}

namespace {

// The index's own wording: its fields as the index file has them
// ("shard index datasets[0].rows"), not as the manifest paths the shared
// parsers name ("manifest shards[1].datasets[0].rows"), which no file holds.
Status AsIndexError(const Status& s, size_t shard) {
  if (s.code() != Code::kCorruption && s.code() != Code::kInvalidArgument) return s;
  const std::string& msg = s.message();
  const std::string in_shard = "manifest " + Idx("", "shards", shard) + ".", manifest = "manifest ";
  std::string worded;
  if (msg.compare(0, in_shard.size(), in_shard) == 0) {
    worded = "shard index " + msg.substr(in_shard.size());
  } else if (msg.compare(0, manifest.size(), manifest) == 0) {
    worded = "shard index " + msg.substr(manifest.size());
  } else {
    return s;
  }
  return s.code() == Code::kCorruption ? Status::Corruption(s.component(), worded)
                                       : Status::InvalidArgument(s.component(), worded);
}

Status ParseShardIndexJsonAsManifest(std::string_view text, size_t shard, Manifest* m, uint64_t max_values);

}  // namespace

Status ParseShardIndexJson(std::string_view text, size_t shard, Manifest* m, uint64_t max_values) {
  return AsIndexError(ParseShardIndexJsonAsManifest(text, shard, m, max_values), shard);
}

namespace {

Status ParseShardIndexJsonAsManifest(std::string_view text, size_t shard, Manifest* m, uint64_t max_values) {
  if (m->format < 3 || shard >= m->shards.size()) {
    return Status::InvalidArgument("ckpt", "shard index " + std::to_string(shard) + " of a format " +
                                               std::to_string(m->format) + " manifest of " +
                                               std::to_string(m->shards.size()) + " shards");
  }
  ManifestSax sax(/*index_doc=*/true, shard, max_values);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.data(), text.data() + text.size(), &sax);
  } catch (const json::exception& e) {
    return Status::Corruption("ckpt", std::string("shard index is not valid JSON: ") + e.what());
  }
  if (!parsed) return sax.error.ok() ? Status::Corruption("ckpt", "shard index is not valid JSON") : sax.error;
  const json& root = sax.root;
  if (m->format >= kChecksummedFormat) {
    BATON_RETURN_IF_ERROR(CheckKeys(root, "", {"format", "step", "shard", "file", "datasets"}));
  } else {
    BATON_RETURN_IF_ERROR(CheckKeys(root, "", {"format", "shard", "file", "datasets"}));
  }
  uint64_t format = 0, index = 0;
  BATON_RETURN_IF_ERROR(GetU64(root, "", "format", UINT64_MAX, &format));
  if (format != static_cast<uint64_t>(m->format)) {
    return Fail(Code::kCorruption, "format", std::to_string(format) + ", the manifest's is " + std::to_string(m->format));
  }
  if (m->format >= kChecksummedFormat) {
    uint64_t step = 0;
    BATON_RETURN_IF_ERROR(GetU64(root, "", "step", UINT64_MAX, &step));
    if (step != static_cast<uint64_t>(m->step)) {
      return Fail(Code::kCorruption, "step", std::to_string(step) + ", the manifest's is " + std::to_string(m->step) +
                                                 " (an index of another version)");
    }
  }
  BATON_RETURN_IF_ERROR(GetU64(root, "", "shard", UINT64_MAX, &index));
  if (index != shard) return Fail(Code::kCorruption, "shard", std::to_string(index) + ", expected " + std::to_string(shard));
  ShardMeta& sh = m->shards[shard];
  std::string file;
  BATON_RETURN_IF_ERROR(GetString(root, "", "file", &file));
  if (file != sh.file) return Fail(Code::kCorruption, "file", Quote(file) + ", the manifest's shard is " + Quote(sh.file));
  std::unordered_map<std::string, uint32_t> names;
  for (size_t a = 0; a < m->arrays.size(); ++a) names.emplace(m->arrays[a].name, static_cast<uint32_t>(a));
  std::vector<uint64_t> row_bytes;
  BATON_RETURN_IF_ERROR(CheckHeader(*m, Code::kCorruption, &row_bytes));
  Status s = ParseDatasets(root, Idx("", "shards", shard), m->format, names, &sax, &sh);
  sh.loaded = true;
  if (s.ok()) s = CheckShardDatasets(*m, shard, row_bytes, Code::kCorruption, nullptr);
  if (!s.ok()) {
    sh.datasets.clear();
    sh.loaded = false;
  }
  return s;
}

}  // namespace

void SealManifest(std::string* text) {
  // "...}\n}\n" -> "...},\n  " + key line + "\n}\n"
  if (text->size() >= 3 && text->compare(text->size() - 3, 3, "\n}\n") == 0) text->resize(text->size() - 3);
  *text += ",\n  ";
  const uint64_t h = Xxh3(text->data(), text->size());
  *text += kSealKey;
  *text += HexU64(h);
  *text += kSealEnd;
}

bool UnsealManifest(std::string* text) {
  if (text->size() < kSealTail + 4 || text->compare(text->size() - kSealTail, kSealKey.size(), kSealKey) != 0 ||
      text->compare(text->size() - kSealTail - 4, 4, ",\n  ") != 0) {
    return false;
  }
  text->resize(text->size() - kSealTail - 4);
  *text += "\n}\n";
  return true;
}

Status CheckManifestStep(const Manifest& m, int64_t version_step, const std::string& version_name) {
  if (m.step == version_step) return Status::OK();
  return Status::Corruption("ckpt", "manifest step " + std::to_string(m.step) + ", but its version " + version_name +
                                        " is step " + std::to_string(version_step) +
                                        ": the manifest was edited or comes from another version");
}

Status CheckSaveStep(const std::string& call, int64_t step) {
  if (step < 0) {
    return Status::InvalidArgument("ckpt", call + ": step " + std::to_string(step) +
                                               " is negative; a step counts the training steps completed (>= 0)");
  }
  if (step > kMaxStep) {
    return Status::InvalidArgument("ckpt", call + ": step " + std::to_string(step) + " is more than the largest step, " +
                                               std::to_string(kMaxStep) + " (2^53 - 1)");
  }
  return Status::OK();
}

Status CheckCompleteManifest(const Manifest& m) {
  if (!m.complete()) return Status::InvalidArgument("ckpt", "manifest of step " + std::to_string(m.step) + ": not every shard is loaded");
  return CheckManifest(m, Code::kCorruption);
}

}  // namespace baton::ckpt
