#include "python/src/results.h"

#include <string>
#include <vector>

namespace baton::python {

py::dict StatsDict(const CheckpointStats& s) {
  py::dict d;
  d["step"] = s.step;
  d["version_path"] = s.version_path;
  d["bytes"] = s.bytes;
  d["total_bytes"] = s.total_bytes;
  d["bytes_read"] = s.bytes_read;
  d["seconds"] = s.seconds;
  d["fallbacks"] = s.fallbacks;
  d["level"] = s.level;
  d["shared"] = s.shared;
  d["bytes_level2"] = s.bytes_level2;
  d["bytes_partner"] = s.bytes_partner;
  d["bytes_level3"] = s.bytes_level3;
  d["total_bytes_level2"] = s.total_bytes_level2;
  d["total_bytes_partner"] = s.total_bytes_partner;
  d["total_bytes_level3"] = s.total_bytes_level3;
  py::dict phases;
  for (const CheckpointStats::Phase& p : s.phases) phases[py::str(p.name)] = p.seconds;
  d["phases"] = phases;
  return d;
}

namespace {

// RestoreResult::fallbacks and CheckpointMetadata::skipped, in one form.
py::list SkippedList(const std::vector<SkippedVersion>& skipped) {
  py::list out;
  for (const SkippedVersion& v : skipped) {
    py::dict f;
    f["path"] = v.path;
    f["step"] = v.step;
    f["reason"] = v.reason.ToString();
    f["code"] = std::string(CodeName(v.reason.code()));
    f["counted"] = v.counted;
    out.append(f);
  }
  return out;
}

}  // namespace

py::dict RestoreDict(const RestoreResult& r) {
  py::dict d;
  d["step"] = r.step ? py::object(py::int_(*r.step)) : py::object(py::none());
  d["version_path"] = r.version_path;
  d["level"] = r.level;
  d["fallbacks"] = SkippedList(r.fallbacks);
  d["quarantined"] = r.quarantined;
  d["rank_state_dropped"] = r.rank_state_dropped;
  return d;
}

py::dict MetadataDict(const CheckpointMetadata& m) {
  py::dict d;
  d["step"] = m.step;
  d["version_path"] = m.version_path;
  d["world_size"] = m.world_size;
  d["time"] = m.time;
  py::list arrays;
  for (const CheckpointArray& a : m.arrays) {
    py::dict e;
    e["name"] = a.name;
    e["dtype"] = std::string(DTypeName(a.dtype));
    py::list shape;
    for (uint64_t n : a.shape) shape.append(n);
    e["shape"] = py::tuple(shape);
    e["replicated"] = a.replicated;
    arrays.append(e);
  }
  d["arrays"] = arrays;
  d["user_blob_bytes"] = m.user_blob_bytes;
  d["user_blob"] = py::bytes(m.user_blob);
  d["has_rank_state"] = m.has_rank_state;
  d["skipped"] = SkippedList(m.skipped);
  return d;
}

}  // namespace baton::python
