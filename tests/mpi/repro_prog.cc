// A small data-parallel training program for the reproducibility tests
// (tests/mpi/test_reproducible.sh): 1000 f32 weights, a gradient per rank
// and step whose all-reduce depends on the order of the additions (1e8 on
// rank 0, -1e8 on the last rank, so any two algorithms that add in
// different orders give different weights), averaged and applied. Rank 0
// prints "weights <FNV-1a hash of the final weights>".
//
//   baton_repro_prog STEPS [--algorithm A] [--save-at STEP FILE] [--resume FILE]
//
// --algorithm sets CommOptions::algorithm (else BATON_ALGORITHM, else the
// default); --save-at writes the step and weights after STEP steps (a
// checkpoint, rank 0); --resume starts from such a file (a requeued run).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/communicator.h"
#include "baton/runtime.h"

namespace {

constexpr size_t kWeights = 1000;

int Fail(const std::string& what) {
  std::fprintf(stderr, "baton_repro_prog: %s\n", what.c_str());
  return 1;
}

uint32_t Fnv(const std::vector<float>& w) {
  uint32_t h = 2166136261u;
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  for (size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: baton_repro_prog STEPS [--algorithm A] [--save-at STEP FILE] [--resume FILE]");
  const long steps = std::strtol(argv[1], nullptr, 10);
  std::optional<baton::Algorithm> algorithm;
  long save_at = -1;
  std::string save_file, resume_file;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--algorithm" && i + 1 < argc) {
      baton::Algorithm x;
      if (!baton::ParseAlgorithm(argv[++i], &x).ok()) return Fail("bad --algorithm");
      algorithm = x;
    } else if (a == "--save-at" && i + 2 < argc) {
      save_at = std::strtol(argv[++i], nullptr, 10);
      save_file = argv[++i];
    } else if (a == "--resume" && i + 1 < argc) {
      resume_file = argv[++i];
    } else {
      return Fail("unknown argument " + a);
    }
  }

  std::unique_ptr<baton::Runtime> rt;
  if (baton::Status s = baton::Runtime::Create(&argc, &argv, {}, &rt); !s.ok()) return Fail(s.ToString());
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  co.algorithm = algorithm;
  std::unique_ptr<baton::Communicator> comm;
  if (baton::Status s = baton::CreateCommunicator(*rt, co, &comm); !s.ok()) return Fail(s.ToString());

  const int r = rt->rank(), P = rt->size();
  std::vector<float> w(kWeights), g(kWeights);
  for (size_t i = 0; i < kWeights; ++i) w[i] = static_cast<float>(i % 7) * 0.5f;
  long start = 0;
  if (!resume_file.empty()) {
    std::FILE* f = std::fopen(resume_file.c_str(), "rb");
    if (f == nullptr) return Fail("cannot open " + resume_file);
    const bool ok = std::fread(&start, sizeof start, 1, f) == 1 && std::fread(w.data(), sizeof(float), kWeights, f) == kWeights;
    std::fclose(f);
    if (!ok) return Fail("short file " + resume_file);
  }
  for (long step = start; step < steps; ++step) {
    if (step == save_at && r == 0) {
      std::FILE* f = std::fopen(save_file.c_str(), "wb");
      if (f == nullptr) return Fail("cannot write " + save_file);
      std::fwrite(&step, sizeof step, 1, f);
      std::fwrite(w.data(), sizeof(float), kWeights, f);
      std::fclose(f);
    }
    rt->BeginStep(step);
    for (size_t i = 0; i < kWeights; ++i) {
      const float big = i % 2 ? (r == 0 ? 1e8f : r == P - 1 ? -1e8f : 1.0f) : 0.0f;
      g[i] = big + std::sin(static_cast<float>(step) * 0.37f + static_cast<float>(i) * 0.11f + static_cast<float>(r)) *
                       1e3f * w[i];
    }
    baton::Status s = comm->AllReduce(g.data(), g.data(), kWeights, baton::DType::kF32, baton::ReduceOp::kAvg);
    if (!s.ok()) return Fail(s.ToString());
    for (size_t i = 0; i < kWeights; ++i) w[i] -= 1e-6f * g[i];
    if (baton::Status e = rt->EndStep(); !e.ok()) return Fail(e.ToString());
  }
  if (r == 0) std::printf("weights %08x\n", Fnv(w));
  return 0;
}
