// baton's result structs as Python dicts (plain data: printable, comparable,
// JSON-serialisable), the same keys as the C++ fields.
#pragma once

#include <pybind11/pybind11.h>

#include "baton/checkpointer.h"

namespace baton::python {

namespace py = pybind11;

// Every field of CheckpointStats; phases as {name: seconds}.
py::dict StatsDict(const CheckpointStats& stats);
// step, version_path, level, fallbacks [{path, step, reason, code, counted}],
// quarantined, rank_state_dropped.
py::dict RestoreDict(const RestoreResult& result);
// step, version_path, world_size, time, arrays [{name, dtype, shape, replicated}],
// user_blob_bytes, has_rank_state.
py::dict MetadataDict(const CheckpointMetadata& meta);

}  // namespace baton::python
