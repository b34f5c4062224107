#include "ckpt/state_dict_tree.h"

#include <nlohmann/json.hpp>

namespace baton::ckpt {
namespace {

using json = nlohmann::ordered_json;  // the tree's own order (the state dict's)

constexpr int kMaxDepth = 200;  // deeper than any state dict; a forged tree stops here, not on the stack

struct Walk {
  std::vector<StateDictTensor>* out;
  std::string error;

  bool Fail(const std::string& path, const std::string& what) {
    error = "the state-dict tree at '" + path + "': " + what;
    return false;
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  static std::string KeyText(const json& key) { return key.is_string() ? key.get<std::string>() : key.dump(); }

  bool Array(const json& node, const std::string& path) {
    StateDictTensor t;
    t.path = path;
    const json& name = node["$array"];
    if (!name.is_string() || !node.contains("dtype") || !node["dtype"].is_string() || !node.contains("shape") ||
        !node["shape"].is_array())
      return Fail(path, "a malformed array node");
    t.dtype = node["dtype"].get<std::string>();
    for (const json& n : node["shape"]) {
      if (!n.is_number_unsigned()) return Fail(path, "a shape that is not a list of sizes");
      t.shape.push_back(n.get<uint64_t>());
    }
    const auto dt = node.find("dtensor");
    if (dt != node.end() && !dt->is_null()) {
      if (!dt->is_object() || !dt->contains("chunks") || !(*dt)["chunks"].is_array())
        return Fail(path, "a malformed DTensor layout");
      for (const json& c : (*dt)["chunks"]) {
        if (!c.is_array() || c.empty() || !c[0].is_string()) return Fail(path, "a malformed DTensor box");
        t.arrays.push_back(c[0].get<std::string>());
      }
    } else {
      t.arrays.push_back(name.get<std::string>());
    }
    out->push_back(std::move(t));
    return true;
  }

  bool Node(const json& node, const std::string& path, int depth) {
    if (depth > kMaxDepth) return Fail(path, "nested deeper than " + std::to_string(kMaxDepth));
    if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i)
        if (!Node(node[i], Join(path, std::to_string(i)), depth + 1)) return false;
      return true;
    }
    if (!node.is_object()) return true;  // a plain value
    if (node.contains("$array")) return Array(node, path);
    if (node.contains("$object")) return !node.contains("state") || Node(node["state"], path, depth + 1);
    if (node.contains("$tuple")) return Node(node["$tuple"], path, depth + 1);
    if (node.contains("$dict")) {
      const json& pairs = node["$dict"];
      if (!pairs.is_array()) return Fail(path, "a malformed $dict");
      for (const json& p : pairs) {
        if (!p.is_array() || p.size() != 2) return Fail(path, "a malformed $dict entry");
        if (!Node(p[1], Join(path, KeyText(p[0])), depth + 1)) return false;
      }
      return true;
    }
    for (const auto& [key, value] : node.items()) {
      if (!key.empty() && key[0] == '$') return true;  // another tag: a value ($float, $bytes, ...) or per-rank
      if (!Node(value, Join(path, key), depth + 1)) return false;
    }
    return true;
  }
};

}  // namespace

Status StateDictTensors(const std::string& user_blob, bool* is_state_dict, std::vector<StateDictTensor>* out) {
  *is_state_dict = false;
  out->clear();
  const json doc = json::parse(user_blob, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "baton.state_dict") return Status::OK();
  *is_state_dict = true;
  if (!doc.contains("tree")) return Status::InvalidArgument("ckpt", "the state-dict blob has no tree");
  Walk w{out, {}};
  if (!w.Node(doc["tree"], "", 0)) {
    out->clear();
    return Status::InvalidArgument("ckpt", w.error);
  }
  return Status::OK();
}

}  // namespace baton::ckpt
