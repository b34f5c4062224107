#include "mpi_runtime/mpi/watchdog.h"

#include <algorithm>
#include <string_view>

namespace baton::mpi {

std::string Describe(const CallInfo& i) {
  static const char* const kOps[] = {"sum", "max", "min", "avg"};  // ReduceOp order
  if (i.label != nullptr) return i.label;
  std::string out = std::string(i.non_blocking ? "non-blocking " : "") + i.name;
  if (std::string_view(i.name) == "barrier") return out;
  out += " of " + std::to_string(i.count * DTypeSize(i.dtype)) + " bytes";
  if (i.per_rank) out += " per rank";
  if (i.root >= 0) return out + " from rank " + std::to_string(i.root);
  out += " (" + std::string(DTypeName(i.dtype));
  if (i.op >= 0 && i.op < 4) out += std::string(" ") + kOps[i.op];
  return out + ")";
}

Watchdog::Watchdog(double seconds, std::function<void(const CallInfo&)> on_expiry)
    : timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))),
      // Late by at most a twentieth of the deadline, and by 0.5 s.
      poll_(std::clamp<Clock::duration>(timeout_ / 20, std::chrono::milliseconds(1), std::chrono::milliseconds(500))),
      on_expiry_(std::move(on_expiry)),
      thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Watchdog::Arm(int slot, const CallInfo& info) {
  Slot& s = slots_[slot];
  std::lock_guard<std::mutex> lock(s.mu);
  s.info = info;
  s.since = Clock::now();
  s.armed = true;
}

void Watchdog::Disarm(int slot) {
  Slot& s = slots_[slot];
  std::lock_guard<std::mutex> lock(s.mu);
  s.armed = false;
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, poll_, [this] { return stop_; })) {
    for (Slot& s : slots_) {
      std::lock_guard<std::mutex> slot_lock(s.mu);  // the caller cannot disarm (and change info) meanwhile
      if (s.armed && Clock::now() - s.since >= timeout_) on_expiry_(s.info);
    }
  }
}

}  // namespace baton::mpi
