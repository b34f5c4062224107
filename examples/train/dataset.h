// The synthetic data set of baton-train and the cursor through it.
//
// File format (BTNDATA1; little-endian; documented in baton-train(1)):
//   offset  0  char[8]  magic "BTNDATA1"
//           8  u64      samples
//          16  u32      features
//          20  u32      classes
//          24  u64      seed it was drawn from
//          32  u64      xxh3-64 of the payload (every byte from offset 64 on)
//          40  u64      xxh3-64 of bytes 0..39 (the fields above)
//          48  u8[16]   zero
//          64  f32[samples][features]  inputs, row-major
//              i32[samples]            labels in [0, classes)
// Each class has a centre drawn from the seed; a sample is its class's
// centre plus unit Gaussian noise, so the classes overlap and the loss falls
// over a few hundred steps rather than at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <baton/status.h>

#include "rng.h"

namespace train {

struct Dataset {
  uint64_t samples = 0;
  uint32_t features = 0, classes = 0;
  uint64_t seed = 0;
  uint64_t checksum = 0;  // the payload's xxh3, which also names the data in checkpoints
  std::vector<float> x;   // samples x features
  std::vector<int32_t> y;

  const float* row(uint64_t i) const { return x.data() + i * features; }
};

// Writes the data set to `path` atomically (a temporary file, fsync, rename).
baton::Status MakeDataset(const std::string& path, uint64_t samples, uint32_t features, uint32_t classes,
                          uint64_t seed);

// Reads and checks a data set: sizes and both checksums. A wrong or damaged
// file is InvalidArgument or Corruption naming the path and the field.
baton::Status LoadDataset(const std::string& path, Dataset* out);

// Where training is in the data: epoch `epoch`, position `offset` of that
// epoch's shuffle. Job-wide (the same on every rank, at every world size);
// saved with every checkpoint. A step reads the global batch: the samples
// [offset, offset + global batch) of the shuffle, micro-batch m the m-th
// equal block of them; an epoch's tail shorter than a global batch is
// skipped.
struct Cursor {
  uint64_t epoch = 0;
  uint64_t offset = 0;
};

class Sampler {
 public:
  Sampler(const Dataset& data, uint64_t seed, uint32_t global_batch);
  // The sample indices of the step at *cursor (the global batch, in
  // micro-batch order), and moves *cursor past them.
  void Next(Cursor* cursor, std::vector<uint64_t>* indices);

 private:
  void Shuffle(uint64_t epoch);

  const Dataset& data_;
  uint64_t seed_;
  uint32_t global_batch_;
  uint64_t shuffled_epoch_ = UINT64_MAX;
  std::vector<uint64_t> perm_;
};

}  // namespace train
