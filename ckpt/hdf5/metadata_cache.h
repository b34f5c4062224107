// The metadata cache of a shard file baton writes: bounded small.
//
// HDF5 sizes its metadata cache by the entries' bytes on disk (2 MiB at
// first, growing to 32 MiB), but holds each entry decoded: a dataset's
// object header with its five attributes is a few hundred bytes on disk and
// about 10 KiB in memory. Writing a shard of many small arrays thus kept
// thousands of headers in memory: the first save of 5,000 arrays of 64
// floats raised a rank's peak memory by 55 MiB (2 ranks, 2026-12-06;
// python/bench/bench_vs_dcp.py --kind tiny, `dcp.save` with BatonWriter:
// 101 MiB), and glibc kept it. A writer visits each dataset once (create,
// attributes, close), so a header evicted after it is never read again;
// only the group's link index is hot, and it stays in 256 KiB.
//
// Threading: HDF5 calls, see h5_check.h.
#pragma once

#include <hdf5.h>

#include "baton/status.h"

namespace baton::ckpt::h5 {

// Sets `fapl`'s metadata cache to a fixed kWriterMetadataCacheBytes.
Status BoundWriterMetadataCache(hid_t fapl);

inline constexpr size_t kWriterMetadataCacheBytes = 256 * 1024;

}  // namespace baton::ckpt::h5
