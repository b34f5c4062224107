// A program for tests/mpi/test_ckpt_processes.sh: checkpoints across
// processes. A process that dies while a version is being restored (a
// crash inside HDF5, the OOM killer), as many times as it is started, must
// not put the job in a crash loop; a second live writer of a directory is
// refused, and the directory is free again once the first one is dead.
//
//   ckpt_prog DIR save           saves steps 1 and 2
//   ckpt_prog DIR save-more      saves step 3
//   ckpt_prog DIR restore        restores; rank 0 prints "restored step=S fallbacks=F"
//   ckpt_prog DIR restore-crash  restores; the last rank kills itself (SIGKILL)
//                                when it is about to read step 2's shards
//   ckpt_prog DIR restore-preempted  restores; every rank gets SIGTERM (as from a
//                                preemption) when it is about to read step 2's
//                                shards and goes on; rank 0 waits (at most 15 s)
//                                for the attempt mark to go, prints "mark removed"
//                                or "mark kept", and is killed (SIGKILL)
//   ckpt_prog DIR hold           saves step 1, rank 0 prints "holding pid P", then
//                                every rank waits until it is killed
//   ckpt_prog DIR save-async     saves steps 1 and 2 with SaveAsync, then Wait
//   ckpt_prog DIR save-async-kill  SaveAsync(1), Wait, SaveAsync(2); the last rank
//                                kills itself (SIGKILL) inside its background
//                                write of step 2 (at the shard's fsync)
//   ckpt_prog DIR save-dtypes    saves step 1 with an array of every newer
//                                dtype (bool, i8, i16, u16, u32, u64, f8e4m3,
//                                f8e5m2: "t_<name>", 8 known values each),
//                                restores it into zeroed arrays and checks them
// lock_wait_seconds is 0: a held directory fails at once. Exit 0 on
// success, 1 on an error, 3 on wrong content.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/runtime.h"
#include "ckpt/fs/env.h"

namespace {

// Kills this process at the Checkpointer's "restore-read <version>" mark of
// a version of step 2: what a segfault inside H5Dread would do.
class CrashingEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  CrashingEnv() : EnvWrapper(baton::ckpt::fs::Env::Default()) {}
  void Mark(const std::string& event) override {
    if (event.rfind("restore-read ", 0) == 0 && event.size() > 3 && event.compare(event.size() - 3, 3, "-s2") == 0) {
      std::fprintf(stderr, "ckpt_prog: dying while reading %s\n", event.c_str() + 13);
      kill(getpid(), SIGKILL);
    }
    EnvWrapper::Mark(event);
  }
};

// A preemption at the "restore-read <version>" mark of step 2: every rank
// gets SIGTERM (the runtime's handler takes it: a stop request) and goes on
// waiting; rank 0, once the attempt mark is gone from restore-failures (or
// after 15 s), is SIGKILLed, as Slurm does when KillWait ends.
class PreemptedEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  explicit PreemptedEnv(int rank) : EnvWrapper(baton::ckpt::fs::Env::Default()), rank_(rank) {}
  void Mark(const std::string& event) override {
    if (event.rfind("restore-read ", 0) == 0 && event.size() > 3 && event.compare(event.size() - 3, 3, "-s2") == 0) {
      const std::string marks = event.substr(13) + "/restore-failures";
      std::fprintf(stderr, "ckpt_prog: SIGTERM while reading %s\n", event.c_str() + 13);
      raise(SIGTERM);
      if (rank_ != 0) {
        for (;;) pause();  // killed with the job when rank 0 dies
      }
      bool kept = true;
      for (int i = 0; i < 150 && kept; ++i) {
        std::ifstream in(marks);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        kept = text.find("unfinished restore attempt") != std::string::npos;
        if (kept) usleep(100 * 1000);
      }
      std::printf("mark %s\n", kept ? "kept" : "removed");
      std::fflush(stdout);
      kill(getpid(), SIGKILL);
    }
    EnvWrapper::Mark(event);
  }

 private:
  int rank_;
};

// Kills this process from the background writer, at the fsync of a shard
// of step 2: the rank dies with its shard written but not synced.
class DyingWriterEnv : public baton::ckpt::fs::EnvWrapper {
 public:
  DyingWriterEnv() : EnvWrapper(baton::ckpt::fs::Env::Default()) {}
  baton::Status SyncFile(const std::string& path) override {
    if (path.find("-s2/shard-") != std::string::npos) {
      std::fprintf(stderr, "ckpt_prog: dying in the background write of %s\n", path.c_str());
      kill(getpid(), SIGKILL);
    }
    return EnvWrapper::SyncFile(path);
  }
};

int Fail(const baton::Status& s, int rank) {
  std::fprintf(stderr, "ckpt_prog rank %d: %s\n", rank, s.ToString().c_str());
  return 1;
}

// One array per dtype added for the Python extension (issue 32, item 10),
// with the values test_ckpt_processes.sh expects h5py to read: extremes of
// every integer type, and for the 8-bit floats the largest finite value,
// the smallest normal and the smallest subnormal.
struct DTypeArray {
  baton::DType dtype;
  std::vector<unsigned char> bytes;  // 8 elements
};

std::vector<DTypeArray> DTypeArrays() {
  using baton::DType;
  std::vector<DTypeArray> out;
  auto add = [&](DType t, const void* values) {
    DTypeArray a{t, std::vector<unsigned char>(8 * baton::DTypeSize(t))};
    std::memcpy(a.bytes.data(), values, a.bytes.size());
    out.push_back(a);
  };
  const bool b[8] = {true, false, true, true, false, false, true, false};
  const int8_t i8[8] = {-128, -1, 0, 1, 127, 42, -42, 7};
  const int16_t i16[8] = {-32768, -1, 0, 1, 32767, 1000, -1000, 7};
  const uint16_t u16[8] = {0, 1, 255, 256, 65535, 1000, 32768, 7};
  const uint32_t u32[8] = {0, 1, 65536, 4294967295u, 2147483648u, 1000, 123456789, 7};
  const uint64_t u64[8] = {0, 1, 4294967296ull, 18446744073709551615ull, 9223372036854775808ull, 1000, 123456789012345ull, 7};
  add(DType::kBool, b);
  add(DType::kI8, i8);
  add(DType::kI16, i16);
  add(DType::kU16, u16);
  add(DType::kU32, u32);
  add(DType::kU64, u64);
  const float e4m3[8] = {0.0f, 1.0f, -2.0f, 0.5f, 448.0f, -448.0f, 0.015625f, 0.001953125f};
  const float e5m2[8] = {0.0f, 1.0f, -2.0f, 0.5f, 57344.0f, -57344.0f, 6.103515625e-05f, 1.52587890625e-05f};
  DTypeArray f4{DType::kF8E4M3, std::vector<unsigned char>(8)}, f5{DType::kF8E5M2, std::vector<unsigned char>(8)};
  for (size_t i = 0; i < 8; ++i) {
    f4.bytes[i] = baton::FloatToFloat8E4M3(e4m3[i]);
    f5.bytes[i] = baton::FloatToFloat8E5M2(e5m2[i]);
  }
  out.push_back(f4);
  out.push_back(f5);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ckpt_prog DIR save|save-more|restore|restore-crash|restore-preempted|hold|save-async|save-async-kill|save-dtypes\n");
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  std::unique_ptr<baton::Runtime> rt;
  if (baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt); !s.ok()) return Fail(s, -1);
  const int rank = rt->rank();
  CrashingEnv crashing;
  DyingWriterEnv dying;
  baton::CheckpointOptions co;
  co.dir = dir;
  co.lock_wait_seconds = 0;
  if (mode == "restore-crash" && rank == rt->size() - 1) co.env = &crashing;
  if (mode == "save-async-kill" && rank == rt->size() - 1) co.env = &dying;
  PreemptedEnv preempted(rank);
  if (mode == "restore-preempted") co.env = &preempted;
  std::unique_ptr<baton::Checkpointer> ck;
  if (baton::Status s = baton::Checkpointer::Create(*rt, co, &ck); !s.ok()) return Fail(s, rank);
  std::vector<int64_t> w(64);
  if (baton::Status s = ck->RegisterReplicated("w", w, {64}); !s.ok()) return Fail(s, rank);
  if (mode == "hold") {
    for (size_t i = 0; i < w.size(); ++i) w[i] = 1000 + static_cast<int64_t>(i);
    if (baton::Status s = ck->Save(1); !s.ok()) return Fail(s, rank);
    if (rank == 0) {
      std::printf("holding pid %d\n", static_cast<int>(getpid()));
      std::fflush(stdout);
    }
    for (;;) pause();
  }
  if (mode == "save-dtypes") {
    std::vector<DTypeArray> arrays = DTypeArrays();
    const std::vector<DTypeArray> want = arrays;
    for (DTypeArray& a : arrays) {
      const std::string name = "t_" + std::string(baton::DTypeName(a.dtype));
      if (baton::Status s = ck->RegisterReplicated(name, a.bytes.data(), a.dtype, {8}); !s.ok()) return Fail(s, rank);
    }
    if (baton::Status s = ck->Save(1); !s.ok()) return Fail(s, rank);
    for (DTypeArray& a : arrays) std::fill(a.bytes.begin(), a.bytes.end(), 0);
    std::optional<int64_t> step;
    if (baton::Status s = ck->Restore(&step); !s.ok()) return Fail(s, rank);
    for (size_t i = 0; i < arrays.size(); ++i) {
      if (arrays[i].bytes != want[i].bytes) {
        std::fprintf(stderr, "ckpt_prog rank %d: t_%s restored other bytes\n", rank,
                     std::string(baton::DTypeName(arrays[i].dtype)).c_str());
        return 3;
      }
    }
    return 0;
  }
  if (mode == "save" || mode == "save-more") {
    const int64_t first = mode == "save" ? 1 : 3, last = mode == "save" ? 2 : 3;
    for (int64_t step = first; step <= last; ++step) {
      for (size_t i = 0; i < w.size(); ++i) w[i] = step * 1000 + static_cast<int64_t>(i);
      if (baton::Status s = ck->Save(step); !s.ok()) return Fail(s, rank);
    }
    return 0;
  }
  if (mode == "save-async" || mode == "save-async-kill") {
    for (int64_t step = 1; step <= 2; ++step) {
      for (size_t i = 0; i < w.size(); ++i) w[i] = step * 1000 + static_cast<int64_t>(i);
      if (baton::Status s = ck->SaveAsync(step); !s.ok()) return Fail(s, rank);
      // Changed at once: the version keeps what SaveAsync copied.
      for (size_t i = 0; i < w.size(); ++i) w[i] = -1;
      if (step == 1 || mode == "save-async") {
        if (baton::Status s = ck->Wait(); !s.ok()) return Fail(s, rank);
      }
    }
    // save-async-kill: the last rank dies in its write; the others wait
    // for it here until the launcher ends them.
    if (baton::Status s = ck->Wait(); !s.ok()) return Fail(s, rank);
    return 0;
  }
  baton::RestoreResult result;
  if (baton::Status s = ck->Restore(baton::RestoreOptions(), &result); !s.ok()) return Fail(s, rank);
  if (!result.step) return Fail(baton::Status::NotFound("test", "nothing restored"), rank);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != *result.step * 1000 + static_cast<int64_t>(i)) return 3;
  }
  if (rank == 0) {
    std::printf("restored step=%lld fallbacks=%zu\n", static_cast<long long>(*result.step), result.fallbacks.size());
  }
  return 0;
}
