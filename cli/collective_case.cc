#include "cli/collective_case.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace baton::cli {
namespace {

double Input(int r, size_t i) { return static_cast<double>((static_cast<size_t>(r) * 7 + i * 3) % 5); }

double Reference(ReduceOp op, int P, size_t i, DType t) {
  double acc = Input(0, i);
  for (int r = 1; r < P; ++r) {
    const double v = Input(r, i);
    acc = op == ReduceOp::kMax ? std::max(acc, v) : op == ReduceOp::kMin ? std::min(acc, v) : acc + v;
  }
  if (op == ReduceOp::kAvg) acc = t == DType::kF64 ? acc / P : static_cast<float>(acc) / static_cast<float>(P);
  return acc;
}

}  // namespace

bool ParseCollective(const std::string& text, Collective* c) {
  for (int i = 0; i < 5; ++i)
    if (text == kCollectiveNames[i]) {
      *c = static_cast<Collective>(i);
      return true;
    }
  return false;
}

Case Case::For(Collective coll, DType t, ReduceOp op, int P, int R, size_t bytes) {
  Case c;
  c.coll = coll, c.t = t, c.op = op, c.P = P, c.R = R;
  const size_t elems = std::max<size_t>(1, bytes / DTypeSize(t));
  c.block = coll == Collective::kAllReduce || coll == Collective::kBroadcast
                ? elems
                : std::max<size_t>(1, elems / static_cast<size_t>(P));
  return c;
}

size_t Case::total() const {
  return coll == Collective::kAllReduce || coll == Collective::kBroadcast ? block : block * static_cast<size_t>(P);
}

size_t Case::send_elems() const {
  switch (coll) {
    case Collective::kAllGather: return block;
    case Collective::kBroadcast: return 0;
    default: return total();
  }
}

size_t Case::recv_elems() const { return coll == Collective::kReduceScatter ? block : total(); }

double Case::BusFactor() const {
  const double n = P;
  switch (coll) {
    case Collective::kAllReduce: return 2 * (n - 1) / n;
    case Collective::kBroadcast: return 1;
    default: return (n - 1) / n;
  }
}

void Fill(const Case& c, HostBuffers* b) {
  const size_t e = DTypeSize(c.t);
  b->send.assign(c.send_elems() * e + 1, 0);
  b->recv.assign(c.recv_elems() * e + 1, 0);
  b->want.assign(c.recv_elems() * e + 1, 0);
  for (size_t i = 0; i < c.send_elems(); ++i) StoreValue(c.t, Input(c.R, i), b->send.data(), i);
  const size_t B = c.block;
  switch (c.coll) {
    case Collective::kAllReduce:
      for (size_t i = 0; i < B; ++i) StoreValue(c.t, Reference(c.op, c.P, i, c.t), b->want.data(), i);
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < B; ++i) StoreValue(c.t, Reference(c.op, c.P, c.R * B + i, c.t), b->want.data(), i);
      break;
    case Collective::kAllGather:
      for (int r = 0; r < c.P; ++r)
        for (size_t i = 0; i < B; ++i) StoreValue(c.t, Input(r, i), b->want.data(), r * B + i);
      break;
    case Collective::kBroadcast:  // root 0's buffer, in place
      for (size_t i = 0; i < B; ++i) {
        StoreValue(c.t, Input(0, i), b->want.data(), i);
        if (c.R == 0) StoreValue(c.t, Input(0, i), b->recv.data(), i);
      }
      break;
    case Collective::kAllToAll:  // block r of the result is block R of rank r's input
      for (int r = 0; r < c.P; ++r)
        for (size_t i = 0; i < B; ++i) StoreValue(c.t, Input(r, c.R * B + i), b->want.data(), r * B + i);
      break;
  }
}

Status RunCollective(Communicator& comm, const Case& c, const void* send, void* recv) {
  const size_t B = c.block;
  switch (c.coll) {
    case Collective::kAllReduce: return comm.AllReduce(send, recv, B, c.t, c.op);
    case Collective::kAllGather: return comm.AllGather(send, recv, B, c.t);
    case Collective::kReduceScatter: return comm.ReduceScatter(send, recv, B, c.t, c.op);
    case Collective::kBroadcast: return comm.Broadcast(recv, B, c.t, 0);
    case Collective::kAllToAll: return comm.AllToAll(send, recv, B, c.t);
  }
  return Status::Internal("cli", "unknown collective");
}

long FirstMismatch(const Case& c, const void* got, const void* want) {
  const size_t n = c.recv_elems(), e = DTypeSize(c.t);
  const bool tolerant = c.op == ReduceOp::kAvg && c.reduces() && IsFloating(c.t);
  if (!tolerant) {
    if (std::memcmp(got, want, n * e) == 0) return -1;
    const auto* g = static_cast<const unsigned char*>(got);
    const auto* w = static_cast<const unsigned char*>(want);
    for (size_t i = 0; i < n * e; ++i)
      if (g[i] != w[i]) return static_cast<long>(i / e);
    return -1;
  }
  for (size_t i = 0; i < n; ++i) {
    const double g = LoadValue(c.t, got, i), w = LoadValue(c.t, want, i);
    if (!(std::fabs(g - w) <= std::ldexp(std::max(1.0, std::fabs(w)), -6))) return static_cast<long>(i);
  }
  return -1;
}

double GBps(size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / (us * 1e-6) / 1e9 : 0; }

void PrintHeader(const PrintSpec& spec) {
  if (spec.json) return;
  const std::string raw_time = std::string(spec.raw) + "_time_us", raw_ratio = std::string(spec.raw) + "/time";
  std::printf("%12s %11s %6s %18s %12s %11s %11s %4s %12s %9s\n", "size(B)", "count", "dtype", "algo", "time_us",
              "algbw(GB/s)", "busbw(GB/s)", "ok", raw_time.c_str(), raw_ratio.c_str());
  std::fflush(stdout);
}

void PrintRow(const PrintSpec& spec, const Case& c, const Row& r) {
  const double algbw = GBps(c.bytes(), r.time_us), busbw = algbw * c.BusFactor();
  const double ratio = r.time_us > 0 ? r.raw_time_us / r.time_us : 0;
  const bool mpi = spec.backend == Backend::kMpi;
  if (spec.json) {
    const std::string raw(spec.raw);
    nlohmann::ordered_json j;
    j["collective"] = CollectiveName(c.coll);
    j["backend"] = BackendName(spec.backend);
    j["algo"] = mpi ? AlgorithmName(r.algo) : "native";  // nccl: NCCL's own algorithms
    if (mpi && r.algo == Algorithm::kAuto) j["auto_algo"] = AlgorithmName(r.chosen);
    j["op"] = ReduceOpName(c.op);
    j["dtype"] = DTypeName(c.t);
    j["bytes"] = c.bytes();
    j["count"] = c.total();
    j["ranks"] = c.P;
    j["nodes"] = spec.nodes;
    j["time_us"] = r.time_us;
    j["algbw"] = algbw;
    j["busbw"] = busbw;
    j["bus_factor"] = c.BusFactor();
    j["ok"] = r.ok < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.ok == 1);
    j["raw"] = raw;
    j[raw + "_time_us"] = r.raw_time_us;
    j[raw + "_busbw"] = GBps(c.bytes(), r.raw_time_us) * c.BusFactor();
    j[raw + "_ratio"] = ratio;
    // Every row has the key; the nccl backend's raw call is NCCL's (MPI
    // here is not CUDA-aware), so raw MPI was not measured: null.
    if (raw != "mpi") j["mpi_time_us"] = nullptr;
    std::cout << j.dump() << std::endl;
    return;
  }
  std::string algo(mpi ? AlgorithmName(r.algo) : "native");
  if (mpi && r.algo == Algorithm::kAuto) algo += "(" + std::string(AlgorithmName(r.chosen)) + ")";
  std::printf("%12zu %11zu %6s %18s %12.2f %11.3f %11.3f %4s %12.2f %9.3f\n", c.bytes(), c.total(),
              std::string(DTypeName(c.t)).c_str(), algo.c_str(), r.time_us, algbw, busbw,
              r.ok < 0 ? "-" : r.ok ? "yes" : "NO", r.raw_time_us, ratio);
  std::fflush(stdout);
}

}  // namespace baton::cli
