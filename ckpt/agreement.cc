#include "ckpt/agreement.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "baton/log.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {

Status MakeStatus(Code code, std::string_view message) {
  switch (code) {
    case Code::kOk: break;
    case Code::kInvalidArgument: return Status::InvalidArgument(log::kCkpt, message);
    case Code::kNotFound: return Status::NotFound(log::kCkpt, message);
    case Code::kCorruption: return Status::Corruption(log::kCkpt, message);
    case Code::kIOError: return Status::IOError(log::kCkpt, message);
    case Code::kTimeout: return Status::Timeout(log::kCkpt, message);
    case Code::kUnavailable: return Status::Unavailable(log::kCkpt, message);
    case Code::kAborted: return Status::Aborted(log::kCkpt, message);
    case Code::kInternal: return Status::Internal(log::kCkpt, message);
  }
  return Status::Internal(log::kCkpt, message);
}

namespace {

// The agreement; sums[0..n) summed over the ranks in its first round.
Status AgreeSumming(MPI_Comm comm, const Status& local, Agreement* out, Code prefer, uint64_t* sums, int n) {
  Agreement result;
  const int failed = local.ok() ? 0 : 1;
  std::vector<uint64_t> in(static_cast<size_t>(n) + 1), sum(in.size());
  in[0] = static_cast<uint64_t>(failed);
  std::copy(sums, sums + n, in.begin() + 1);
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
      MPI_Allreduce(in.data(), sum.data(), static_cast<int>(in.size()), MPI_UINT64_T, MPI_SUM, comm)));
  std::copy(sum.begin() + 1, sum.end(), sums);
  const int total = static_cast<int>(sum[0]);
  if (total > 0) {
    int rank = 0, world_rank = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
    (void)BATON_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    int size = 0;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(comm, &size)));
    // Keys in three bands: the preferred code, failures of their own, and
    // ranks that stopped because another one failed (kAborted), which
    // report only when no rank has a failure of its own.
    const int band = local.code() == prefer ? 0 : local.code() == Code::kAborted ? 2 : 1;
    int key = !failed ? INT_MAX : band * size + rank;
    int first_key = INT_MAX;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&key, &first_key, 1, MPI_INT, MPI_MIN, comm)));
    const int first = first_key % size;
    // The first failing rank sends its code, world rank and message.
    std::string text;
    long long head[3] = {0, 0, 0};
    if (rank == first) {
      text = local.message();
      head[0] = static_cast<long long>(local.code());
      head[1] = world_rank;
      head[2] = static_cast<long long>(text.size());
    }
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(head, 3, MPI_LONG_LONG, first, comm)));
    text.resize(static_cast<size_t>(head[2]));
    if (head[2] > 0) {
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(head[2]), MPI_CHAR, first, comm)));
    }
    std::string msg = "rank " + std::to_string(head[1]) + ": " + text;
    if (total > 1) {
      msg += " (and " + std::to_string(total - 1) + " more rank" + (total > 2 ? "s" : "") + " failed)";
    }
    result.status = MakeStatus(static_cast<Code>(head[0]), msg);
    result.failed_ranks = total;
    result.first_failed = first;
  }
  Status s = result.status;
  if (out != nullptr) *out = std::move(result);
  return s;
}

}  // namespace

Status Agree(MPI_Comm comm, const Status& local, Agreement* out, Code prefer) {
  return AgreeSumming(comm, local, out, prefer, nullptr, 0);
}

Status AgreeAndSum(MPI_Comm comm, const Status& local, uint64_t* sums, int n, Code prefer) {
  return AgreeSumming(comm, local, nullptr, prefer, sums, n);
}

Status BcastOutcome(MPI_Comm comm, const Status& local, std::string* payload, int root) {
  // A record of 256 bytes: what a version's name or a few offsets need.
  constexpr size_t kInline = 232;
  struct Record {
    long long code, world_rank, length;
    char text[kInline];
  } record{};
  static_assert(sizeof(Record) == 256);
  int rank = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  std::string text;
  if (rank == root) {
    text = local.ok() ? *payload : local.message();
    int world_rank = 0;
    (void)BATON_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    record.code = static_cast<long long>(local.code());
    record.world_rank = world_rank;
    record.length = static_cast<long long>(text.size());
    std::memcpy(record.text, text.data(), std::min(text.size(), kInline));
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&record, sizeof record, MPI_BYTE, root, comm)));
  if (record.length > INT_MAX) {
    return Status::Internal(log::kCkpt, "a text of " + std::to_string(record.length) + " bytes to broadcast");
  }
  const size_t length = static_cast<size_t>(record.length);
  if (length > kInline) {
    text.resize(length);
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm)));
  } else {
    text.assign(record.text, length);
  }
  const Code code = static_cast<Code>(record.code);
  if (code == Code::kOk) {
    *payload = std::move(text);
    return Status::OK();
  }
  return MakeStatus(code, "rank " + std::to_string(record.world_rank) + ": " + text);
}

Status BcastString(MPI_Comm comm, std::string* s, int root) {
  long long n = static_cast<long long>(s->size());
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm)));
  if (n > INT_MAX) return Status::Internal(log::kCkpt, "a text of " + std::to_string(n) + " bytes to broadcast");
  s->resize(static_cast<size_t>(n));
  if (n == 0) return Status::OK();
  return BATON_MPI_CHECK(MPI_Bcast(s->data(), static_cast<int>(n), MPI_CHAR, root, comm));
}

}  // namespace baton::ckpt
