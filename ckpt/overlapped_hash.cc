#include "ckpt/overlapped_hash.h"

#include <system_error>

namespace baton::ckpt {

OverlappedHash::~OverlappedHash() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // Run hashes what is queued first
}

void OverlappedHash::Hash(const Piece& p) {
  if (p.n > 0) sum_.Update(p.data, p.n);
  if (!p.last) return;
  const uint64_t digest = sum_.Digest();
  sum_.Reset();
  std::lock_guard<std::mutex> lock(mu_);
  ended_.push_back(digest);
}

void OverlappedHash::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    const Piece p = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Hash(p);
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

uint64_t OverlappedHash::Submit(const void* data, size_t n, bool last) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = ++submitted_;
  if (!no_thread_ && !thread_.joinable()) {
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      // No thread (EAGAIN: a process at its thread limit): every byte is
      // still hashed, only without the overlap.
      no_thread_ = true;
    }
  }
  if (no_thread_) {
    lock.unlock();
    Hash(Piece{data, n, last});
    lock.lock();
    ++done_;
    return ticket;
  }
  queue_.push_back(Piece{data, n, last});
  lock.unlock();
  cv_.notify_all();
  return ticket;
}

void OverlappedHash::WaitFor(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this, ticket] { return done_ >= ticket; });
}

uint64_t OverlappedHash::Finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_ >= submitted_; });
  return sum_.Digest();  // the thread is idle: nothing queued
}

std::vector<uint64_t> OverlappedHash::TakeDigests() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  out.swap(ended_);
  return out;
}

}  // namespace baton::ckpt
