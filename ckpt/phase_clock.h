// Where a Save or Restore spends its time: each phase's seconds on this
// rank, for CheckpointStats::phases (the benchmark's per-phase table).
//
// The phases are named up front, in a fixed order, so that every rank
// holds the same list (a rank with no part in a phase reports 0) and the
// benchmark can reduce them over ranks element by element. Lap(name) adds
// the time since the previous Lap (or since Start) to that phase. Not
// thread-safe: one clock per call, used by the calling thread.
#pragma once

#include <chrono>
#include <initializer_list>
#include <vector>

#include "baton/checkpointer.h"

namespace baton::ckpt {

class PhaseClock {
 public:
  PhaseClock() = default;
  // Names the phases (zeroed) and starts the clock.
  void Start(std::vector<CheckpointStats::Phase>* phases, std::initializer_list<const char*> names) {
    phases_ = phases;
    phases_->clear();
    for (const char* n : names) phases_->push_back({n, 0.0});
    last_ = std::chrono::steady_clock::now();
  }
  // A name not given to Start is a programming error; its time is dropped.
  void Lap(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    if (phases_ == nullptr) return;
    for (CheckpointStats::Phase& p : *phases_) {
      if (p.name == name) {
        p.seconds += dt;
        return;
      }
    }
  }

 private:
  std::vector<CheckpointStats::Phase>* phases_ = nullptr;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace baton::ckpt
