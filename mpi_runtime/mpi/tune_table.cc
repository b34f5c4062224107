#include "mpi_runtime/mpi/tune_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace baton::mpi {
namespace {

constexpr const char* kComponent = "runtime";
constexpr int kVersion = 1;

Status Bad(const std::string& source, const std::string& what) {
  return Status::InvalidArgument(kComponent, "tune table " + source + ": " + what);
}

// A non-negative integer field of `obj`, or a Status naming it.
Status Field(const nlohmann::json& obj, const char* name, const std::string& where, const std::string& source,
             long long min, long long* out) {
  auto it = obj.find(name);
  if (it == obj.end()) return Bad(source, where + ": missing \"" + name + "\"");
  if (!it->is_number_integer() || it->get<long long>() < min)
    return Bad(source, where + ": \"" + name + "\" must be an integer >= " + std::to_string(min) + ", not " +
                           it->dump());
  *out = it->get<long long>();
  return Status::OK();
}

// mkdir -p for the directory part of `path`.
Status MakeParents(const std::string& path) {
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    const std::string dir = path.substr(0, pos);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::IOError(kComponent, "creating " + dir + ": " + std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace

std::string_view TunedAlgoName(TunedAlgo a) {
  switch (a) {
    case TunedAlgo::kNative: return "native";
    case TunedAlgo::kHierarchical: return "hierarchical";
    case TunedAlgo::kRing: return "ring";
  }
  return "?";
}

Status ParseTunedAlgo(std::string_view text, TunedAlgo* a) {
  for (TunedAlgo x : {TunedAlgo::kNative, TunedAlgo::kHierarchical, TunedAlgo::kRing})
    if (text == TunedAlgoName(x)) return *a = x, Status::OK();
  return Status::InvalidArgument(kComponent, "algorithm '" + std::string(text) +
                                                 "' is not one of native, hierarchical, ring");
}

TuneKey KeyOf(const Topology& topology) {
  TuneKey k;
  k.ranks = static_cast<int>(topology.node_of.size());
  k.nodes = topology.num_nodes();
  k.ranks_per_node = topology.Uniform() && k.nodes > 0 ? k.ranks / k.nodes : 0;
  return k;
}

Status ParseTuneTable(std::string_view text, const std::string& source, TuneTable* table) {
  table->clear();
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad(source, "not valid JSON");
  if (!doc.is_object()) return Bad(source, "expected a JSON object at the top");
  long long version = 0;
  BATON_RETURN_IF_ERROR(Field(doc, "version", "top level", source, 1, &version));
  if (version != kVersion)
    return Bad(source, "version " + std::to_string(version) + " is not " + std::to_string(kVersion) +
                           " (rerun baton bench collectives --tune)");
  auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) return Bad(source, "\"entries\" must be an array");
  TuneTable out;
  for (size_t e = 0; e < entries->size(); ++e) {
    const nlohmann::json& entry = (*entries)[e];
    const std::string where = "entries[" + std::to_string(e) + "]";
    if (!entry.is_object()) return Bad(source, where + " is not an object");
    long long ranks = 0, nodes = 0, rpn = 0;
    BATON_RETURN_IF_ERROR(Field(entry, "ranks", where, source, 1, &ranks));
    BATON_RETURN_IF_ERROR(Field(entry, "nodes", where, source, 1, &nodes));
    BATON_RETURN_IF_ERROR(Field(entry, "ranks_per_node", where, source, 0, &rpn));
    TuneKey key{static_cast<int>(ranks), static_cast<int>(nodes), static_cast<int>(rpn)};
    if (out.count(key)) return Bad(source, where + " repeats the job shape of an earlier entry");
    auto sizes = entry.find("sizes");
    if (sizes == entry.end() || !sizes->is_array() || sizes->empty())
      return Bad(source, where + ": \"sizes\" must be a non-empty array");
    std::map<size_t, TunedAlgo>& by_size = out[key];
    for (size_t i = 0; i < sizes->size(); ++i) {
      const nlohmann::json& row = (*sizes)[i];
      const std::string rwhere = where + ".sizes[" + std::to_string(i) + "]";
      if (!row.is_object()) return Bad(source, rwhere + " is not an object");
      long long bytes = 0;
      BATON_RETURN_IF_ERROR(Field(row, "bytes", rwhere, source, 0, &bytes));
      auto algo = row.find("algo");
      if (algo == row.end() || !algo->is_string()) return Bad(source, rwhere + ": \"algo\" must be a string");
      TunedAlgo a;
      if (Status s = ParseTunedAlgo(algo->get<std::string>(), &a); !s.ok()) return Bad(source, rwhere + ": " + s.message());
      by_size[static_cast<size_t>(bytes)] = a;
    }
  }
  *table = std::move(out);
  return Status::OK();
}

std::string FormatTuneTable(const TuneTable& table) {
  std::string out = "{\"version\": " + std::to_string(kVersion) + ",\n \"entries\": [";
  bool first = true;
  for (const auto& [key, by_size] : table) {
    nlohmann::ordered_json e;
    e["ranks"] = key.ranks;
    e["nodes"] = key.nodes;
    e["ranks_per_node"] = key.ranks_per_node;
    e["sizes"] = nlohmann::ordered_json::array();
    for (const auto& [bytes, algo] : by_size)
      e["sizes"].push_back({{"bytes", bytes}, {"algo", std::string(TunedAlgoName(algo))}});
    out += (first ? "\n  " : ",\n  ") + e.dump();
    first = false;
  }
  return out + "\n ]}\n";
}

TunedAlgo LookupTuned(const TuneTable& table, const TuneKey& key, size_t bytes) {
  auto entry = table.find(key);
  if (entry == table.end() || entry->second.empty()) return TunedAlgo::kNative;
  const auto& by_size = entry->second;
  auto it = by_size.upper_bound(bytes);  // first size above `bytes`
  if (it == by_size.begin()) return it->second;  // below every measured size: the smallest one's
  return std::prev(it)->second;
}

TunedAlgo PickTuned(double native_us, double hierarchical_us, double ring_us, double margin) {
  TunedAlgo best = hierarchical_us <= ring_us ? TunedAlgo::kHierarchical : TunedAlgo::kRing;
  const double best_us = std::min(hierarchical_us, ring_us);
  return best_us < native_us * (1 - margin) ? best : TunedAlgo::kNative;
}

std::string DefaultTunePath() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string f = env("BATON_TUNE_FILE"); !f.empty()) return f;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/baton/tune.json";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/baton/tune.json";
  return "";
}

Status ReadTuneFile(const std::string& path, std::string* content, bool* exists) {
  content->clear();
  *exists = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
    return Status::IOError(kComponent, "reading tune table " + path + ": " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError(kComponent, "reading tune table " + path + ": read failed");
  *content = ss.str();
  *exists = true;
  return Status::OK();
}

Status WriteTuneFile(const std::string& path, const std::string& content) {
  BATON_RETURN_IF_ERROR(MakeParents(path));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) return Status::IOError(kComponent, "writing " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::IOError(kComponent, "renaming " + tmp + " to " + path + ": " + std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  return Status::OK();
}

Status LoadTuneTable(const std::string& path, bool is_root, const std::function<Status(std::string*)>& share,
                     TuneTable* table) {
  table->clear();
  // What the root found, as one string every rank receives: 'M' no table,
  // 'E' + the read error, 'T' + the file's text.
  std::string msg;
  if (is_root) {
    if (path.empty()) {
      msg = "M";
    } else {
      std::string text;
      bool exists = false;
      Status s = ReadTuneFile(path, &text, &exists);
      msg = !s.ok() ? "E" + s.message() : exists ? "T" + text : "M";
    }
  }
  BATON_RETURN_IF_ERROR(share(&msg));
  if (msg.empty() || msg[0] == 'M') return Status::OK();
  if (msg[0] == 'E') return Status::IOError(kComponent, msg.substr(1));
  return ParseTuneTable(std::string_view(msg).substr(1), path, table);
}

}  // namespace baton::mpi
