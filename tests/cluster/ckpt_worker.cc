// A training-shaped checkpoint worker for the cluster tests: restores, checks
// bit for bit that what it got is the version the test expected, then saves
// steps in a loop (until it is killed, or --saves are done).
//
// Content is a pure function of (step, global row, column), so any world
// size can check any version: a sharded f32 array "w" of 4096 x 64 split
// evenly over the ranks, a replicated i64 array "opt" of 1000, and the user
// blob "step=N".
//
//   ckpt_worker --dir D [--expect STEP|none] [--saves N] [--sleep-ms MS] [--group-size G]
//               [--local-dir L] [--shared-every M]
// Prints "restored step=S ok level=V level2_bytes=A partner_bytes=B
// level3_bytes=C" (rank 0; the bytes over all ranks, CheckpointStats)
// after a successful check; exits 3 on a mismatch, 1 on an error, 0 when
// the saves are done.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/runtime.h"

namespace {

constexpr uint64_t kRows = 4096, kCols = 64, kOpt = 1000;

float W(int64_t step, uint64_t row, uint64_t col) {
  // Exact in f32: the integer stays below 2^24.
  return static_cast<float>((static_cast<uint64_t>(step) * 7919 + row * kCols + col) % (1u << 24)) * 0.25f;
}
int64_t Opt(int64_t step, uint64_t i) { return step * 1000003 + static_cast<int64_t>(i); }

void Fill(int64_t step, uint64_t first, uint64_t rows, std::vector<float>* w, std::vector<int64_t>* opt) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < kCols; ++c) (*w)[r * kCols + c] = W(step, first + r, c);
  for (uint64_t i = 0; i < kOpt; ++i) (*opt)[i] = Opt(step, i);
}

int Fail(const baton::Status& s, int rank) {
  std::fprintf(stderr, "ckpt_worker rank %d: %s\n", rank, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, expect = "any";
  std::string local_dir;
  long saves = 1000000, sleep_ms = 0, group_size = 0, shared_every = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") dir = v;
    else if (k == "--expect") expect = v;
    else if (k == "--saves") saves = std::atol(v.c_str());
    else if (k == "--sleep-ms") sleep_ms = std::atol(v.c_str());
    else if (k == "--group-size") group_size = std::atol(v.c_str());
    else if (k == "--local-dir") local_dir = v;
    else if (k == "--shared-every") shared_every = std::atol(v.c_str());
    else {
      std::fprintf(stderr, "ckpt_worker: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::unique_ptr<baton::Runtime> rt;
  if (baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt); !s.ok()) return Fail(s, -1);
  const int rank = rt->rank(), size = rt->size();
  const uint64_t first = kRows * static_cast<uint64_t>(rank) / static_cast<uint64_t>(size);
  const uint64_t rows = kRows * static_cast<uint64_t>(rank + 1) / static_cast<uint64_t>(size) - first;
  std::vector<float> w(rows * kCols, -1.0f);
  std::vector<int64_t> opt(kOpt, -1);

  baton::CheckpointOptions co;
  co.dir = dir;
  co.group_size = static_cast<int>(group_size);
  co.local_dir = local_dir;
  co.shared_every = static_cast<int>(shared_every);
  std::unique_ptr<baton::Checkpointer> ck;
  baton::Status s = baton::Checkpointer::Create(*rt, co, &ck);
  if (s.ok()) s = ck->RegisterSharded("w", w.data(), baton::DType::kF32, {kRows, kCols}, first, rows);
  if (s.ok()) s = ck->RegisterReplicated("opt", opt.data(), baton::DType::kI64, {kOpt});
  std::optional<int64_t> step;
  baton::RestoreResult restored;
  if (s.ok()) s = ck->Restore(baton::RestoreOptions(), &restored);
  if (!s.ok()) return Fail(s, rank);
  step = restored.step;

  // The check: the expected version, bit for bit.
  const std::string got = step ? std::to_string(*step) : "none";
  if (expect != "any" && expect != got) {
    std::fprintf(stderr, "ckpt_worker rank %d: restored step %s, expected %s\n", rank, got.c_str(), expect.c_str());
    return 3;
  }
  if (step) {
    std::vector<float> want_w(w.size());
    std::vector<int64_t> want_opt(kOpt);
    Fill(*step, first, rows, &want_w, &want_opt);
    const std::string want_blob = "step=" + std::to_string(*step);
    if (std::memcmp(w.data(), want_w.data(), w.size() * sizeof(float)) != 0 || opt != want_opt ||
        ck->user_blob() != want_blob) {
      std::fprintf(stderr, "ckpt_worker rank %d: step %lld restored with different content\n", rank,
                   static_cast<long long>(*step));
      return 3;
    }
  }
  if (rank == 0) {
    const baton::CheckpointStats& st = ck->last_stats();
    std::printf("restored step=%s ok level=%d level2_bytes=%llu partner_bytes=%llu level3_bytes=%llu\n", got.c_str(),
                restored.level, static_cast<unsigned long long>(st.total_bytes_level2),
                static_cast<unsigned long long>(st.total_bytes_partner),
                static_cast<unsigned long long>(st.total_bytes_level3));
    std::fflush(stdout);
  }

  for (long i = 0; i < saves; ++i) {
    const int64_t next = (step ? *step : 0) + 1 + i;
    Fill(next, first, rows, &w, &opt);
    if (baton::Status b = ck->SetUserBlob("step=" + std::to_string(next)); !b.ok()) return Fail(b, rank);
    if (baton::Status v = ck->Save(next); !v.ok()) return Fail(v, rank);
    if (rank == 0) {
      std::printf("saved step=%lld\n", static_cast<long long>(next));
      std::fflush(stdout);
    }
    if (sleep_ms > 0) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
  }
  return 0;
}
