// The partner exchange of level 2 (ckpt/partner_exchange.h).
//
// ExchangeFiles moves every file in lockstep rounds: a header round (each
// sender's file size, or that it cannot read it), then one round per piece
// (every sender reads and posts its next piece, every receiver posts a
// receive for it, all wait), then a trailer round (the sender's xxh3 of
// what it sent, and whether every read succeeded). Within a round all
// messages are non-blocking, so the ring's sends overlap: each pair moves
// its bytes at the same time as the others, and no round waits on a message
// that is posted in a later one. Messages of one move share one tag and
// MPI keeps their order between a pair.
#include "ckpt/partner_exchange.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include "baton/log.h"
#include "ckpt/checksum.h"
#include "ckpt/fs/durable_write.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

constexpr uint64_t kPieceBytes = 16u << 20;

int TagOf(size_t move) { return static_cast<int>(move % 30000) + 1; }

uint64_t Pieces(uint64_t bytes) { return (bytes + kPieceBytes - 1) / kPieceBytes; }

double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string Base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::vector<int> PartnerRanks(const std::vector<int>& node_of) {
  int nodes = 0;
  for (int n : node_of) nodes = std::max(nodes, n + 1);
  std::vector<std::vector<int>> ranks_on(static_cast<size_t>(nodes));
  std::vector<int> local(node_of.size());
  for (size_t r = 0; r < node_of.size(); ++r) {
    std::vector<int>& on = ranks_on[static_cast<size_t>(node_of[r])];
    local[r] = static_cast<int>(on.size());
    on.push_back(static_cast<int>(r));
  }
  std::vector<int> out(node_of.size(), -1);
  if (nodes < 2) return out;
  for (size_t r = 0; r < node_of.size(); ++r) {
    const std::vector<int>& next = ranks_on[static_cast<size_t>((node_of[r] + 1) % nodes)];
    out[r] = next[static_cast<size_t>(local[r]) % next.size()];
  }
  return out;
}

Status ExchangeFiles(MPI_Comm comm, fs::Env* env, const std::vector<FileMove>& moves, mode_t file_mode,
                     uint64_t* received, double deadline) {
  *received = 0;
  int me = 0;
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(comm, &me)));
  // What this rank does for each move it takes part in.
  struct Send {
    size_t move;
    uint64_t head[2] = {0, 0};  // [bytes, readable]
    uint64_t tail[2] = {0, 1};  // [xxh3, every read succeeded]
    Xxh3Stream sum;
    std::vector<char> buf;
    Status failure;
  };
  struct Recv {
    size_t move;
    uint64_t head[2] = {0, 0};
    uint64_t tail[2] = {0, 0};
    Xxh3Stream sum;
    std::vector<char> buf;
    std::unique_ptr<fs::DurableFile> file;  // removes its temporary unless committed
    Status failure;
  };
  std::vector<std::unique_ptr<Send>> sends;
  std::vector<std::unique_ptr<Recv>> recvs;
  for (size_t i = 0; i < moves.size(); ++i) {
    if (moves[i].from == me) {
      auto s = std::make_unique<Send>();
      s->move = i;
      fs::FileInfo info;
      s->failure = env->Stat(moves[i].from_path, &info);
      if (s->failure.ok() && info.type != fs::FileType::kRegular) {
        s->failure = Status::InvalidArgument(log::kCkpt, moves[i].from_path + " is not a regular file");
      }
      if (s->failure.ok()) {
        s->head[0] = info.size;
        s->head[1] = 1;
      }
      sends.push_back(std::move(s));
    }
    if (moves[i].to == me) {
      auto r = std::make_unique<Recv>();
      r->move = i;
      recvs.push_back(std::move(r));
    }
  }
  std::vector<MPI_Request> reqs;
  auto wait_all = [&]() -> Status {
    Status s = BATON_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
    reqs.clear();
    return s;
  };
  // Headers.
  for (auto& s : sends) {
    const FileMove& m = moves[s->move];
    reqs.emplace_back();
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Isend(s->head, 2, MPI_UINT64_T, m.to, TagOf(s->move), comm, &reqs.back())));
  }
  for (auto& r : recvs) {
    const FileMove& m = moves[r->move];
    reqs.emplace_back();
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Irecv(r->head, 2, MPI_UINT64_T, m.from, TagOf(r->move), comm, &reqs.back())));
  }
  BATON_RETURN_IF_ERROR(wait_all());
  for (auto& r : recvs) {
    const FileMove& m = moves[r->move];
    if (r->head[1] != 1) {
      r->failure = Status::IOError(log::kCkpt, "rank " + std::to_string(m.from) + " could not read " + m.from_path +
                                                   " to send it to rank " + std::to_string(m.to));
      continue;
    }
    // A large file: its pages leave the cache after the fsync.
    fs::DurableWriteOptions o;
    o.mode = file_mode;
    o.drop_cache = true;
    r->failure = fs::DurableFile::Create(env, Dir(m.to_path), Base(m.to_path), o, &r->file);
  }
  // Pieces, round by round. With a deadline every rank runs the same
  // rounds (the most any rank needs), agreeing before each whether any
  // rank is past it.
  const bool bounded = std::isfinite(deadline);
  const Status past = Status::Aborted(log::kCkpt, "the partner exchange ran past its deadline (WaitOrAbandon's bound)");
  uint64_t rounds = 0;
  for (auto& s : sends) rounds = std::max(rounds, Pieces(s->head[0]));
  for (auto& r : recvs) rounds = std::max(rounds, Pieces(r->head[0]));
  if (bounded) {
    uint64_t mine = rounds;
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine, &rounds, 1, MPI_UINT64_T, MPI_MAX, comm)));
  }
  bool stopped = false;
  for (uint64_t k = 0; k < rounds; ++k) {
    if (bounded) {
      int mine = SteadyNow() > deadline ? 1 : 0, any = 0;
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm)));
      if (any != 0) {
        stopped = true;
        break;
      }
    }
    for (auto& s : sends) {
      if (k >= Pieces(s->head[0])) continue;
      const FileMove& m = moves[s->move];
      const uint64_t n = std::min(kPieceBytes, s->head[0] - k * kPieceBytes);
      s->buf.resize(n);
      if (s->failure.ok()) s->failure = env->ReadAt(m.from_path, k * kPieceBytes, n, s->buf.data());
      if (s->failure.ok()) s->sum.Update(s->buf.data(), n);
      reqs.emplace_back();
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
          MPI_Isend(s->buf.data(), static_cast<int>(n), MPI_BYTE, m.to, TagOf(s->move), comm, &reqs.back())));
    }
    for (auto& r : recvs) {
      if (k >= Pieces(r->head[0])) continue;
      const FileMove& m = moves[r->move];
      const uint64_t n = std::min(kPieceBytes, r->head[0] - k * kPieceBytes);
      r->buf.resize(n);
      reqs.emplace_back();
      BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(
          MPI_Irecv(r->buf.data(), static_cast<int>(n), MPI_BYTE, m.from, TagOf(r->move), comm, &reqs.back())));
    }
    BATON_RETURN_IF_ERROR(wait_all());
    for (auto& r : recvs) {
      if (k >= Pieces(r->head[0]) || !r->failure.ok()) continue;
      if (bounded && SteadyNow() > deadline) {
        r->failure = past;  // a slow disk: no further piece written
        continue;
      }
      r->sum.Update(r->buf.data(), r->buf.size());
      r->failure = r->file->Append(r->buf.data(), r->buf.size());
    }
  }
  if (stopped) {
    for (auto& r : recvs) r->file.reset();  // its temporary goes
    return past;
  }
  // Trailers.
  for (auto& s : sends) {
    const FileMove& m = moves[s->move];
    s->tail[0] = s->sum.Digest();
    s->tail[1] = s->failure.ok() ? 1 : 0;
    reqs.emplace_back();
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Isend(s->tail, 2, MPI_UINT64_T, m.to, TagOf(s->move), comm, &reqs.back())));
  }
  for (auto& r : recvs) {
    const FileMove& m = moves[r->move];
    reqs.emplace_back();
    BATON_RETURN_IF_ERROR(
        BATON_MPI_CHECK(MPI_Irecv(r->tail, 2, MPI_UINT64_T, m.from, TagOf(r->move), comm, &reqs.back())));
  }
  BATON_RETURN_IF_ERROR(wait_all());
  Status first;
  for (auto& s : sends) {
    if (!s->failure.ok() && first.ok()) first = s->failure.Annotate("sending a partner copy");
  }
  for (auto& r : recvs) {
    const FileMove& m = moves[r->move];
    if (r->failure.ok() && r->tail[1] != 1) {
      r->failure = Status::IOError(log::kCkpt, "rank " + std::to_string(m.from) + " failed to read " + m.from_path +
                                                   " while sending it");
    }
    // The checksum of what arrived, before the bytes become the file: a
    // file in place is a verified copy.
    if (r->failure.ok() && r->sum.Digest() != r->tail[0]) {
      r->failure = Status::Corruption(log::kCkpt, m.to_path + " received from rank " + std::to_string(m.from) +
                                                      ": xxh3 " + HexU64(r->sum.Digest()) + ", sent " +
                                                      HexU64(r->tail[0]));
    }
    if (r->failure.ok()) r->failure = r->file->Commit();
    if (r->failure.ok()) {
      *received += r->head[0];
    } else {
      r->file.reset();  // its temporary goes
      if (first.ok()) first = r->failure.Annotate("receiving a partner copy");
    }
  }
  return first;
}

}  // namespace baton::ckpt
