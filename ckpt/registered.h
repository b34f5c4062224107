// One registered array of a Checkpointer and this rank's part of it.
#pragma once

#include <cstdint>

#include "ckpt/manifest.h"

namespace baton::ckpt {

struct Registered {
  ArrayMeta meta;
  void* data = nullptr;
  uint64_t first_row = 0;  // sharded: this rank's rows
  uint64_t rows = 0;
};

}  // namespace baton::ckpt
