// Which rank runs on which node: pure data, no MPI (the Runtime fills it).
#pragma once

#include <vector>

namespace baton {

// Which rank runs on which node. Node ids are dense, 0..num_nodes-1, in the
// order of each node's lowest world rank.
struct Topology {
  std::vector<int> node_of;  // node id of every world rank
  int num_nodes() const;
  std::vector<int> RanksOn(int node) const;  // ascending world ranks
  // True when every node holds the same number of ranks.
  bool Uniform() const;
};

// Node ids from a node key per rank (what SLURM_NODEID or the shared-memory
// split gave each rank): dense ids in the order of first appearance. Pure;
// used by Create and unit-tested.
Topology TopologyFromNodeKeys(const std::vector<long>& key_of_rank);

}  // namespace baton
