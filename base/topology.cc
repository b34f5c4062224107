#include "baton/topology.h"

#include <algorithm>

namespace baton {

int Topology::num_nodes() const {
  return node_of.empty() ? 0 : *std::max_element(node_of.begin(), node_of.end()) + 1;
}

std::vector<int> Topology::RanksOn(int node) const {
  std::vector<int> ranks;
  for (size_t r = 0; r < node_of.size(); ++r)
    if (node_of[r] == node) ranks.push_back(static_cast<int>(r));
  return ranks;
}

bool Topology::Uniform() const {
  const int n = num_nodes();
  if (n == 0) return true;
  std::vector<int> count(static_cast<size_t>(n), 0);
  for (int node : node_of) ++count[static_cast<size_t>(node)];
  return std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; });
}

Topology TopologyFromNodeKeys(const std::vector<long>& key_of_rank) {
  Topology t;
  std::vector<long> seen;
  for (long key : key_of_rank) {
    auto it = std::find(seen.begin(), seen.end(), key);
    if (it == seen.end()) {
      seen.push_back(key);
      it = seen.end() - 1;
    }
    t.node_of.push_back(static_cast<int>(it - seen.begin()));
  }
  return t;
}

}  // namespace baton
