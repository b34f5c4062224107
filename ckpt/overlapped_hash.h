#ifndef BATON_CKPT_OVERLAPPED_HASH_H_
#define BATON_CKPT_OVERLAPPED_HASH_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "ckpt/checksum.h"

namespace baton::ckpt {

// The xxh3 of byte streams given in pieces, hashed on a second thread while
// the caller reads on. A restore reads chunk after chunk in pieces and
// verifies each chunk whole; hashing each piece right after its read (on
// the reading thread) added the hash's time to the read's, with the disk
// idle meanwhile, and handing each piece to a new thread and waiting for it
// before the next read (the first version) made every piece wait for the
// scheduler on a loaded node (restore "verify" 0.35 s beside a read of 0.18
// s, 2026-12-03). Now one thread hashes a queue of pieces: the caller waits
// only for a buffer it is about to reuse (WaitFor) and at the end (Finish).
// Streams follow each other without a pause: a piece marked `last` ends one.
// Pieces are hashed in the order given, one at a time.
//
//   OverlappedHash h;
//   for each piece: h.WaitFor(ticket of buf's last piece); read into buf;
//                   ticket = h.Submit(buf, n, last);
//   h.Finish(); the digest of each ended stream: h.TakeDigests(), in order
//
// A piece's bytes must stay valid and unchanged until WaitFor(its ticket),
// Finish or the destructor returns. Where no thread can be started, a piece
// is hashed on the caller's thread in Submit instead.
class OverlappedHash {
 public:
  OverlappedHash() = default;
  ~OverlappedHash();  // waits for the pieces queued
  OverlappedHash(const OverlappedHash&) = delete;
  OverlappedHash& operator=(const OverlappedHash&) = delete;

  // Queues a piece (`last`: it ends a stream, whose digest then joins
  // TakeDigests' and the next piece begins a new one). Its ticket: > 0.
  uint64_t Submit(const void* data, size_t n, bool last = false);
  // Waits until the piece of `ticket` (and every earlier one) is hashed;
  // 0: returns at once.
  void WaitFor(uint64_t ticket);
  // Waits for every piece queued. The digest of the stream in progress
  // (what was submitted since the last `last` piece).
  uint64_t Finish();
  // The digests of the streams ended and hashed so far, oldest first, and
  // forgets them.
  std::vector<uint64_t> TakeDigests();

 private:
  struct Piece {
    const void* data;
    size_t n;
    bool last;
  };
  void Run();
  void Hash(const Piece& p);  // on the hashing thread, or the caller's without one

  Xxh3Stream sum_;              // the hashing thread's, or the caller's once done_ == submitted_
  std::mutex mu_;               // guards everything below
  std::condition_variable cv_;  // a piece queued, a piece hashed, or stop
  std::deque<Piece> queue_;
  uint64_t submitted_ = 0, done_ = 0;
  std::vector<uint64_t> ended_;
  bool stop_ = false;
  bool no_thread_ = false;
  std::thread thread_;  // started at the first Submit
};

}  // namespace baton::ckpt

#endif  // BATON_CKPT_OVERLAPPED_HASH_H_
