// The tensors of a version saved from a state dict, read from its tree.
//
// Python's one format (python/baton/dcp/state_tree.py, state_walk.py): a
// version written by baton.Checkpointer, dcp.save with BatonWriter,
// baton.lightning or `baton ckpt import` holds the state's JSON tree in its
// user blob ({"format": "baton.state_dict", "version": 1, "tree": ...});
// each tensor there is an array node naming the baton arrays that hold its
// boxes (one for a tensor saved whole, one per box of a DTensor). This reads
// that tree for `baton ckpt inspect`, which shows whole tensors by their
// state-dict paths beside the arrays. MPI-free, no Python; the blob is
// untrusted (a malformed tree is InvalidArgument, never a crash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "baton/status.h"

namespace baton::ckpt {

struct StateDictTensor {
  std::string path;                 // the keys joined by '.', as DCP's fqn ("model.layer1.weight")
  std::string dtype;                // torch's name ("float32", "bfloat16") or NumPy's ("<f4")
  std::vector<uint64_t> shape;      // the global shape
  std::vector<std::string> arrays;  // the baton arrays of its boxes
};

// The tensors of `user_blob`, in the tree's order. `*is_state_dict` is false
// (and OK returned) for a blob that is not a state-dict tree: a version of
// ArrayCheckpointer or C++, whose arrays are all there is.
Status StateDictTensors(const std::string& user_blob, bool* is_state_dict, std::vector<StateDictTensor>* out);

}  // namespace baton::ckpt
