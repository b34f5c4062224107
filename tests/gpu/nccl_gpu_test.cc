// The nccl backend on a real GPU, one rank, no MPI: every collective on
// device buffers, every dtype and reduce op, the non-blocking forms, and
// the refusals (host memory, avg on integers, a bad root) that must leave
// the communicator usable. Built and run by tests/gpu/run-gpu-tests, which
// compiles it with the MPI-free half of the backend only (no MPI, Boost or
// HDF5 on the machine). Plain main(): GoogleTest need not be there either.
//
// With one rank every collective's result equals its input (avg divides
// by one), so results are compared byte for byte.
//
// Prints "PASS name" / "FAIL name: why" lines and a summary; exit 0 when
// everything passed, 1 otherwise, 77 with "SKIP: no GPU visible (<reason>)"
// as the last line when CUDA finds no device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "baton/dtype.h"
#include "mpi_runtime/nccl/buffer_location.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#include "tests/gpu/one_rank.h"

namespace {

using baton::DType;
using baton::ReduceOp;
using baton::Status;
namespace nccl = baton::nccl;

int g_failed = 0, g_passed = 0;

void Report(const std::string& name, const Status& s) {
  if (s.ok()) {
    ++g_passed;
    std::printf("PASS %s\n", name.c_str());
  } else {
    ++g_failed;
    std::printf("FAIL %s: %s\n", name.c_str(), s.ToString().c_str());
  }
  std::fflush(stdout);
}

Status Fail(const std::string& what) { return Status::Internal("test", what); }

Status Cuda(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return Status::OK();
  return Fail(std::string(what) + ": " + cudaGetErrorString(rc));
}

// A device buffer that frees itself.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n > 0 && cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  bool ok() const { return bytes == 0 || ptr != nullptr; }
};

// count elements of `dtype` holding 0..99 repeated, as bytes.
std::vector<unsigned char> Pattern(DType dtype, size_t count, int salt) {
  const size_t w = baton::DTypeSize(dtype);
  std::vector<unsigned char> out(count * w);
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((i + salt) % 100);
    baton::StoreValue(dtype, v, out.data(), i);
  }
  return out;
}

Status Upload(const DeviceBuffer& d, const std::vector<unsigned char>& h) {
  if (h.empty()) return Status::OK();
  return Cuda(cudaMemcpy(d.ptr, h.data(), h.size(), cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

Status Expect(const DeviceBuffer& d, const std::vector<unsigned char>& want) {
  if (want.empty()) return Status::OK();
  std::vector<unsigned char> got(want.size());
  BATON_RETURN_IF_ERROR(Cuda(cudaMemcpy(got.data(), d.ptr, got.size(), cudaMemcpyDeviceToHost),
                             "cudaMemcpy to host"));
  auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  if (diff.first == got.end()) return Status::OK();
  return Fail("result differs at byte " + std::to_string(diff.first - got.begin()) + " of " +
              std::to_string(got.size()));
}

enum class Prim { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };
const char* PrimName(Prim p) {
  switch (p) {
    case Prim::kAllReduce: return "all_reduce";
    case Prim::kAllGather: return "all_gather";
    case Prim::kReduceScatter: return "reduce_scatter";
    case Prim::kBroadcast: return "broadcast";
    case Prim::kAllToAll: return "all_to_all";
  }
  return "?";
}

// One collective on device buffers, blocking or through its Request.
Status RunOne(nccl::NcclCommunicator& c, Prim prim, DType dtype, ReduceOp op, size_t count,
              bool nonblocking) {
  const auto input = Pattern(dtype, count, 3);
  DeviceBuffer send(input.size()), recv(input.size());
  if (!send.ok() || !recv.ok()) return Fail("cudaMalloc of " + std::to_string(input.size()) + " bytes");
  BATON_RETURN_IF_ERROR(Upload(send, input));
  BATON_RETURN_IF_ERROR(Upload(recv, Pattern(dtype, count, 50)));  // not the answer
  std::unique_ptr<baton::Request> r;
  Status s;
  switch (prim) {
    case Prim::kAllReduce:
      s = nonblocking ? c.IAllReduce(send.ptr, recv.ptr, count, dtype, op, &r)
                      : c.AllReduce(send.ptr, recv.ptr, count, dtype, op);
      break;
    case Prim::kAllGather:
      s = nonblocking ? c.IAllGather(send.ptr, recv.ptr, count, dtype, &r)
                      : c.AllGather(send.ptr, recv.ptr, count, dtype);
      break;
    case Prim::kReduceScatter:
      s = nonblocking ? c.IReduceScatter(send.ptr, recv.ptr, count, dtype, op, &r)
                      : c.ReduceScatter(send.ptr, recv.ptr, count, dtype, op);
      break;
    case Prim::kBroadcast:  // in place, root 0: the buffer keeps its bytes
      s = nonblocking ? c.IBroadcast(send.ptr, count, dtype, 0, &r) : c.Broadcast(send.ptr, count, dtype, 0);
      break;
    case Prim::kAllToAll:
      s = nonblocking ? c.IAllToAll(send.ptr, recv.ptr, count, dtype, &r)
                      : c.AllToAll(send.ptr, recv.ptr, count, dtype);
      break;
  }
  BATON_RETURN_IF_ERROR(s);
  if (nonblocking) {
    bool done = false;
    for (int i = 0; i < 10000000 && !done; ++i) BATON_RETURN_IF_ERROR(r->Test(&done));
    BATON_RETURN_IF_ERROR(r->Wait());
  }
  return Expect(prim == Prim::kBroadcast ? send : recv, input);
}

double MedianUs(nccl::NcclCommunicator& c, size_t bytes) {
  DeviceBuffer buf(bytes);
  if (!buf.ok()) return -1;
  std::vector<double> t;
  for (int i = 0; i < 25; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!c.AllReduce(buf.ptr, buf.ptr, bytes / 4, DType::kF32, ReduceOp::kSum).ok()) return -1;
    if (i >= 5) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A host function that holds its stream for `ms` milliseconds.
void CUDART_CB Hold(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

// Issue 14, item 2, on the device: the communicator's stream is
// non-blocking; each collective completes on its own event (a second one
// held behind the caller's stream does not hold the first's Wait); the
// caller's stream can wait for a collective without the host.
void StreamsAndEvents(const nccl::NcclApi& api) {
  cudaStream_t callers = nullptr, after = nullptr;
  if (cudaStreamCreateWithFlags(&callers, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&after, cudaStreamNonBlocking) != cudaSuccess) {
    Report("streams for the stream tests", Fail("cudaStreamCreateWithFlags"));
    return;
  }
  nccl::NcclOptions o = nccl::gpu_test::OneRankOptions();
  o.stream = callers;
  std::unique_ptr<nccl::NcclCommunicator> made;
  Status s = nccl::gpu_test::MakeOneRankCommunicator(api, &made, o);
  Report("create with the caller's stream", s);
  if (!s.ok()) return;
  nccl::NcclCommunicator& c = *made;
  unsigned flags = 0;
  Status f = Cuda(cudaStreamGetFlags(c.stream(), &flags), "cudaStreamGetFlags");
  if (f.ok() && !(flags & cudaStreamNonBlocking)) f = Fail("flags " + std::to_string(flags));
  Report("the communicator's stream is non-blocking", f);

  const size_t n = 1 << 20;
  DeviceBuffer a(n * 4), b(n * 4);
  std::unique_ptr<baton::Request> first, second;
  Status e = a.ok() && b.ok() ? Status::OK() : Fail("cudaMalloc");
  if (e.ok()) e = c.IAllReduce(a.ptr, a.ptr, n, DType::kF32, ReduceOp::kSum, &first);
  if (e.ok()) e = Cuda(cudaLaunchHostFunc(callers, Hold, reinterpret_cast<void*>(intptr_t{1000})), "cudaLaunchHostFunc");
  if (e.ok()) e = c.IAllReduce(b.ptr, b.ptr, n, DType::kF32, ReduceOp::kSum, &second);
  const auto t0 = std::chrono::steady_clock::now();
  if (e.ok()) e = first->Wait();
  const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  bool done = true;
  if (e.ok()) e = second->Test(&done);
  if (e.ok() && first_ms > 500) e = Fail("waiting for the first took " + std::to_string(first_ms) + " ms");
  if (e.ok() && done) e = Fail("the second was done while the caller's stream held it");
  if (e.ok()) e = second->Wait();
  Report("each collective completes on its own event (first in " + std::to_string(static_cast<int>(first_ms)) +
             " ms, second held 1 s)",
         e);

  // The way back to the caller's stream: no host wait.
  const auto input = Pattern(DType::kF32, n, 7);
  DeviceBuffer src(n * 4), dst(n * 4);
  std::vector<unsigned char> got(n * 4);
  std::unique_ptr<baton::Request> r;
  Status w = Upload(src, input);
  if (w.ok()) w = c.IAllReduce(src.ptr, dst.ptr, n, DType::kF32, ReduceOp::kSum, &r);
  if (w.ok()) w = r->WaitOnStream(after);
  if (w.ok()) w = Cuda(cudaMemcpyAsync(got.data(), dst.ptr, got.size(), cudaMemcpyDeviceToHost, after), "cudaMemcpyAsync");
  if (w.ok()) w = Cuda(cudaStreamSynchronize(after), "cudaStreamSynchronize");
  if (w.ok() && got != input) w = Fail("the caller's stream read the result before the collective wrote it");
  r.reset();
  Report("the caller's stream waits for a collective (WaitOnStream)", w);
  made.reset();
  cudaStreamDestroy(callers);
  cudaStreamDestroy(after);
}

// Issue 14, item 5, on the device: the mpi backend's check asks CUDA
// nothing in a process without a context (it would make one), and once
// there is one refuses device memory and passes host memory.
Status HostCheckWithoutAContext(const nccl::NcclApi& api) {
  auto check = nccl::MakeHostBufferCheck(api);
  std::vector<float> host(4);
  BATON_RETURN_IF_ERROR(check(host.data(), "send", "all_reduce"));
  if (nccl::AnyPrimaryContext(api)) return Fail("a primary context exists after the check of a host buffer");
  return Status::OK();
}

Status HostCheckWithAContext(const nccl::NcclApi& api) {
  auto check = nccl::MakeHostBufferCheck(api);
  DeviceBuffer dev(64);
  std::vector<float> host(4);
  void* pinned = nullptr;
  if (!dev.ok() || cudaMallocHost(&pinned, 64) != cudaSuccess) return Fail("allocations");
  Status d = check(dev.ptr, "send", "all_reduce");
  Status h = check(host.data(), "send", "all_reduce");
  Status p = check(pinned, "recv", "all_reduce");
  cudaFreeHost(pinned);
  if (d.code() != baton::Code::kInvalidArgument || d.message().find("is device memory (CUDA device 0)") == std::string::npos)
    return Fail("device memory: " + d.ToString());
  if (!h.ok()) return Fail("host memory: " + h.ToString());
  if (!p.ok()) return Fail("pinned host memory: " + p.ToString());
  return Status::OK();
}

// --exit-on-timeout (run by run-gpu-tests, which expects exit 75 within a
// few seconds): kExit, op_timeout 1 s; the collective waits behind the
// caller's stream, which a host function holds for 10 s, while the host
// blocks in cudaStreamSynchronize on the communicator's stream. Only the
// watchdog can end it.
int ExitOnTimeout(const nccl::NcclApi& api) {
  cudaStream_t callers = nullptr;
  if (cudaStreamCreateWithFlags(&callers, cudaStreamNonBlocking) != cudaSuccess) return 2;
  nccl::NcclOptions o = nccl::gpu_test::OneRankOptions();
  o.op_timeout = std::chrono::seconds(1);
  o.on_timeout = baton::OnTimeout::kExit;
  o.stream = callers;
  std::unique_ptr<nccl::NcclCommunicator> c;
  Status s = nccl::gpu_test::MakeOneRankCommunicator(api, &c, o);
  if (!s.ok()) {
    std::printf("create: %s\n", s.ToString().c_str());
    return 2;
  }
  DeviceBuffer buf(4096);
  std::unique_ptr<baton::Request> r;
  if (cudaLaunchHostFunc(callers, Hold, reinterpret_cast<void*>(intptr_t{10000})) != cudaSuccess) return 2;
  s = c->IAllReduce(buf.ptr, buf.ptr, 1024, DType::kF32, ReduceOp::kSum, &r);
  if (!s.ok()) {
    std::printf("enqueue: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf("enqueued; blocking the host in cudaStreamSynchronize\n");
  std::fflush(stdout);
  cudaStreamSynchronize(c->stream());
  std::printf("cudaStreamSynchronize returned: the watchdog did not end the process\n");
  return 1;
}


// ---- issue 31, item 10: what breaks on a real GPU --------------------------

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// nranks = 2 with only rank 0 present: NCCL's init waits for the missing
// peer; init_timeout ends it and the half-made communicator is really
// aborted (ncclCommAbort joins NCCL's init thread) within abort_timeout.
Status InitTimeoutThenAbort(const nccl::NcclApi& api) {
  nccl::NcclOptions o = nccl::gpu_test::OneRankOptions();
  o.init_timeout = std::chrono::seconds(2);
  o.abort_timeout = std::chrono::seconds(20);
  o.on_timeout = baton::OnTimeout::kReturn;
  nccl::NcclCommunicator c(api, o);
  BATON_RETURN_IF_ERROR(c.SetUpDevice(0));
  ncclUniqueId id;
  BATON_RETURN_IF_ERROR(BATON_NCCL_CHECK(api, api.GetUniqueId(&id)));
  const auto t0 = std::chrono::steady_clock::now();
  Status s = c.InitWorld(id, 0, 2);
  const double took = Seconds(t0);
  std::printf("  init of 2 ranks with one present: %.2f s: %s\n", took, s.ToString().c_str());
  if (s.code() != baton::Code::kTimeout) return Fail("expected a Timeout, got " + s.ToString());
  if (s.message().find("communicator aborted") == std::string::npos)
    return Fail("the half-made communicator was not aborted in time: " + s.ToString());
  if (took > 2 + 20 + 5) return Fail("took " + std::to_string(took) + " s");
  return Status::OK();
}

// kReturn: a collective past its deadline (held behind the caller's
// stream) breaks the communicator: the NCCL communicators are aborted and
// every later call returns the same Timeout at once.
Status ReturnAbort(const nccl::NcclApi& api) {
  cudaStream_t callers = nullptr;
  BATON_RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&callers, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  nccl::NcclOptions o = nccl::gpu_test::OneRankOptions();
  o.op_timeout = std::chrono::seconds(1);
  o.on_timeout = baton::OnTimeout::kReturn;
  o.stream = callers;
  std::unique_ptr<nccl::NcclCommunicator> c;
  BATON_RETURN_IF_ERROR(nccl::gpu_test::MakeOneRankCommunicator(api, &c, o));
  DeviceBuffer buf(4096);
  BATON_RETURN_IF_ERROR(Cuda(cudaLaunchHostFunc(callers, Hold, reinterpret_cast<void*>(intptr_t{4000})),
                             "cudaLaunchHostFunc"));
  const auto t0 = std::chrono::steady_clock::now();
  Status s = c->AllReduce(buf.ptr, buf.ptr, 1024, DType::kF32, ReduceOp::kSum);
  const double took = Seconds(t0);
  std::printf("  kReturn: %.2f s: %s\n", took, s.ToString().c_str());
  if (s.code() != baton::Code::kTimeout) return Fail("expected a Timeout, got " + s.ToString());
  if (took > 1 + 10 + 3) return Fail("took " + std::to_string(took) + " s (op_timeout 1 s, abort_timeout 10 s)");
  Status again = c->Barrier();
  if (again.code() != baton::Code::kTimeout) return Fail("a later call: " + again.ToString());
  if (c->world_comm() != nullptr) return Fail("the world communicator was not aborted");
  cudaStreamSynchronize(callers);  // the host function ends; then nothing is left on it
  c.reset();
  cudaStreamDestroy(callers);
  return Status::OK();
}

// More than 2^31 elements (NCCL takes size_t counts; an int anywhere on
// the way would wrap): u8, all_reduce and broadcast, the last bytes checked.
Status CountsAbove2To31(nccl::NcclCommunicator& c) {
  const size_t count = (size_t{1} << 31) + 64;
  size_t free_bytes = 0, total = 0;
  BATON_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
  if (free_bytes < 2 * count + (size_t{1} << 30)) {
    // Not a skip: said, and counted as passed only where memory cannot hold it.
    std::printf("  counts above 2^31: %zu MiB free, %zu MiB needed: not run on this device\n", free_bytes >> 20,
                (2 * count) >> 20);
    return Status::OK();
  }
  DeviceBuffer send(count), recv(count);
  if (!send.ok() || !recv.ok()) return Fail("cudaMalloc of 2 x " + std::to_string(count) + " bytes");
  BATON_RETURN_IF_ERROR(Cuda(cudaMemset(send.ptr, 1, count), "cudaMemset"));
  BATON_RETURN_IF_ERROR(Cuda(cudaMemset(recv.ptr, 0, count), "cudaMemset"));
  std::vector<unsigned char> tail(64);
  for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<unsigned char>(7 + i);
  char* end = static_cast<char*>(send.ptr) + count - tail.size();
  BATON_RETURN_IF_ERROR(Cuda(cudaMemcpy(end, tail.data(), tail.size(), cudaMemcpyHostToDevice), "cudaMemcpy"));
  BATON_RETURN_IF_ERROR(c.AllReduce(send.ptr, recv.ptr, count, DType::kU8, ReduceOp::kSum));
  std::vector<unsigned char> got(tail.size());
  BATON_RETURN_IF_ERROR(Cuda(cudaMemcpy(got.data(), static_cast<char*>(recv.ptr) + count - got.size(), got.size(),
                                        cudaMemcpyDeviceToHost),
                             "cudaMemcpy"));
  if (got != tail) return Fail("all_reduce of 2^31 + 64 u8: the last 64 bytes differ");
  unsigned char mid = 0;
  BATON_RETURN_IF_ERROR(Cuda(cudaMemcpy(&mid, static_cast<char*>(recv.ptr) + (size_t{1} << 31) - 1, 1,
                                        cudaMemcpyDeviceToHost),
                             "cudaMemcpy"));
  if (mid != 1) return Fail("all_reduce of 2^31 + 64 u8: byte 2^31 - 1 is " + std::to_string(mid));
  BATON_RETURN_IF_ERROR(c.Broadcast(send.ptr, count, DType::kU8, 0));
  return Status::OK();
}

// The uneven forms on one rank: one block, the input itself.
Status UnevenForms(nccl::NcclCommunicator& c) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{1} << 20) + 3}) {
    const auto input = Pattern(DType::kF32, n, 5);
    DeviceBuffer send(input.size()), recv(input.size());
    if (!send.ok() || !recv.ok()) return Fail("cudaMalloc");
    BATON_RETURN_IF_ERROR(Upload(send, input));
    BATON_RETURN_IF_ERROR(Upload(recv, Pattern(DType::kF32, n, 50)));
    BATON_RETURN_IF_ERROR(c.AllGatherV(send.ptr, recv.ptr, {n}, DType::kF32));
    BATON_RETURN_IF_ERROR(Expect(recv, input).Annotate("all_gather_v of " + std::to_string(n)));
    BATON_RETURN_IF_ERROR(Upload(recv, Pattern(DType::kF32, n, 50)));
    BATON_RETURN_IF_ERROR(c.ReduceScatterV(send.ptr, recv.ptr, {n}, DType::kF32, ReduceOp::kSum));
    BATON_RETURN_IF_ERROR(Expect(recv, input).Annotate("reduce_scatter_v of " + std::to_string(n)));
  }
  return Status::OK();
}

// Teardown: destroying a communicator after collectives finalizes within
// seconds (finalize_timeout is 30 s), gives its device memory back, and a
// new one works afterwards.
Status TeardownChecked(const nccl::NcclApi& api) {
  size_t free_before = 0, free_after = 0, total = 0;
  BATON_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_before, &total), "cudaMemGetInfo"));
  std::chrono::steady_clock::time_point t0;
  {
    std::unique_ptr<nccl::NcclCommunicator> c;
    BATON_RETURN_IF_ERROR(nccl::gpu_test::MakeOneRankCommunicator(api, &c));
    BATON_RETURN_IF_ERROR(RunOne(*c, Prim::kAllReduce, DType::kF32, ReduceOp::kSum, 1 << 20, true));
    BATON_RETURN_IF_ERROR(c->Barrier());
    t0 = std::chrono::steady_clock::now();
  }
  const double took = Seconds(t0);
  BATON_RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_after, &total), "cudaMemGetInfo"));
  std::printf("  teardown: %.3f s; device memory free %zu MiB before, %zu MiB after\n", took, free_before >> 20,
              free_after >> 20);
  if (took > 10) return Fail("teardown took " + std::to_string(took) + " s");
  if (free_after + (size_t{64} << 20) < free_before)
    return Fail("teardown left " + std::to_string((free_before - free_after) >> 20) + " MiB of device memory");
  std::unique_ptr<nccl::NcclCommunicator> again;
  BATON_RETURN_IF_ERROR(nccl::gpu_test::MakeOneRankCommunicator(api, &again));
  return RunOne(*again, Prim::kAllReduce, DType::kF32, ReduceOp::kSum, 1000, false);
}

}  // namespace

int main(int argc, char** argv) {
  const nccl::NcclApi* loaded = nullptr;
  if (Status s = nccl::RealNcclApi(&loaded); !s.ok()) {
    std::printf("FAIL: %s\n", s.message().c_str());
    return 1;
  }
  const nccl::NcclApi& api = *loaded;
  int devices = 0;
  Status visible = nccl::CheckDeviceVisible(api, &devices);
  if (!visible.ok()) {
    std::printf("SKIP: no GPU visible (%s)\n", visible.message().c_str());
    return 77;
  }
  if (argc > 1 && std::string(argv[1]) == "--exit-on-timeout") return ExitOnTimeout(api);
  int version = 0;
  ncclGetVersion(&version);
  std::printf("CUDA devices: %d, NCCL %d\n", devices, version);
  // Before anything makes a CUDA context.
  Report("the mpi backend's host check makes no CUDA context", HostCheckWithoutAContext(api));

  std::unique_ptr<nccl::NcclCommunicator> made;
  Status s = nccl::gpu_test::MakeOneRankCommunicator(api, &made);
  Report("create (device, world, node and leaders on demand)", s);
  if (!s.ok()) return 1;
  nccl::NcclCommunicator& c = *made;
  Report("leaders communicator made on local rank 0",
         c.leaders_comm() != nullptr ? Status::OK() : Fail("leaders_comm() is null"));
  int current = -1;
  cudaGetDevice(&current);
  Report("the communicator's device is the program's current device after the calls",
         current == c.device() && c.device() >= 0 ? Status::OK()
                                          : Fail("current " + std::to_string(current) + ", communicator's " +
                                                 std::to_string(c.device())));
  Report("the mpi backend's host check refuses device memory", HostCheckWithAContext(api));
  StreamsAndEvents(api);

  const DType dtypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                          DType::kI32, DType::kI64, DType::kU8};
  const size_t counts[] = {0, 1, 1000, (1u << 20) + 3};
  for (DType d : dtypes) {
    for (size_t n : counts) {
      for (bool nb : {false, true}) {
        const std::string tail = std::string(" ") + std::string(baton::DTypeName(d)) + " x" +
                                 std::to_string(n) + (nb ? " (non-blocking)" : "");
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
          if (op == ReduceOp::kAvg && !baton::IsFloating(d)) continue;
          for (Prim p : {Prim::kAllReduce, Prim::kReduceScatter})
            Report(std::string(PrimName(p)) + "(" + std::string(baton::ReduceOpName(op)) + ")" + tail,
                   RunOne(c, p, d, op, n, nb));
        }
        for (Prim p : {Prim::kAllGather, Prim::kBroadcast, Prim::kAllToAll})
          Report(PrimName(p) + tail, RunOne(c, p, d, ReduceOp::kSum, n, nb));
      }
    }
  }
  Report("barrier", c.Barrier());
  {
    std::unique_ptr<baton::Request> r;
    Status b = c.IBarrier(&r);
    if (b.ok()) b = r->Wait();
    Report("barrier (non-blocking)", b);
  }

  // Refusals: a clear Status, no fault, and the communicator goes on.
  {
    std::vector<float> host(16);
    DeviceBuffer dev(64);
    Status h = c.AllReduce(host.data(), dev.ptr, 16, DType::kF32, ReduceOp::kSum);
    Report("host memory is refused",
           h.code() == baton::Code::kInvalidArgument ? Status::OK() : Fail("got " + h.ToString()));
    Status a = c.AllReduce(dev.ptr, dev.ptr, 16, DType::kI32, ReduceOp::kAvg);
    Report("avg on i32 is refused",
           a.code() == baton::Code::kInvalidArgument ? Status::OK() : Fail("got " + a.ToString()));
    Status b = c.Broadcast(dev.ptr, 16, DType::kF32, 1);
    Report("root 1 of 1 is refused",
           b.code() == baton::Code::kInvalidArgument ? Status::OK() : Fail("got " + b.ToString()));
    Report("usable after the refusals", RunOne(c, Prim::kAllReduce, DType::kF32, ReduceOp::kSum, 1000, false));
  }

  Report("all_gather_v and reduce_scatter_v", UnevenForms(c));
  Report("counts above 2^31 elements", CountsAbove2To31(c));
  Report("teardown finalizes in seconds and frees the device memory", TeardownChecked(api));

  // Not a check: what one rank's all_reduce costs here (median of 20).
  for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20})
    std::printf("all_reduce f32 %zu bytes: median %.1f us\n", bytes, MedianUs(c, bytes));

  // Last: an aborted communicator's kernel may still run later (its
  // stream and scratch are leaked on purpose), so nothing measured follows.
  Report("init of 2 ranks with one present: init_timeout, then a real abort", InitTimeoutThenAbort(api));
  Report("kReturn: a collective past its deadline aborts the communicator", ReturnAbort(api));

  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
