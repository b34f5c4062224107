#include "mpi_runtime/heartbeat.h"

#include <algorithm>
#include <sstream>

#include "baton/log.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi_check.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTag = 7;
// A message: {kind, n, ranks[n]}; beats from rank 0 carry its view.
constexpr int kBeat = 1, kBye = 2;

std::string Seconds(Clock::duration d) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << std::chrono::duration<double>(d).count() << " s";
  return os.str();
}

}  // namespace

Status Heartbeat::Start(MPI_Comm world, double interval_seconds, double drain_seconds,
                        std::vector<std::string> hosts, std::unique_ptr<Heartbeat>* out) {
  std::unique_ptr<Heartbeat> hb(new Heartbeat());
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_dup(world, &hb->comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_set_errhandler(hb->comm_, MPI_ERRORS_RETURN)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_rank(hb->comm_, &hb->rank_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Comm_size(hb->comm_, &hb->size_)));
  hb->interval_ = std::chrono::duration<double>(interval_seconds);
  hb->drain_seconds_ = drain_seconds;
  hb->hosts_ = std::move(hosts);
  const size_t n = static_cast<size_t>(hb->size_);
  hb->last_seen_.assign(n, Clock::now());
  hb->departed_.assign(n, false);
  hb->sends_.assign(n, MPI_REQUEST_NULL);
  hb->send_bufs_.assign(n, {});
  hb->recv_buf_.assign(n + 2, 0);
  if (hb->size_ > 1) hb->thread_ = std::thread([h = hb.get()] { h->Loop(); });
  *out = std::move(hb);
  return Status::OK();
}

Heartbeat::~Heartbeat() { Stop(); }

void Heartbeat::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  // Freed once its abandoned sends are done; never after an MPI failure
  // (mpi_check.h: under UCX the free itself crashed).
  if (comm_ != MPI_COMM_NULL && !mpi::Failed()) MPI_Comm_free(&comm_);
}

std::vector<int> Heartbeat::Silent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return silent_;
}

void Heartbeat::Send(int peer, int kind, const std::vector<int>& ranks) {
  MPI_Request& req = sends_[static_cast<size_t>(peer)];
  if (req != MPI_REQUEST_NULL) {
    int done = 0;
    if (!BATON_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE)).ok()) return;
    if (!done) return;  // the last beat is still in flight: the peer is not taking them
  }
  std::vector<int>& buf = send_bufs_[static_cast<size_t>(peer)];
  buf.assign({kind, static_cast<int>(ranks.size())});
  buf.insert(buf.end(), ranks.begin(), ranks.end());
  if (!BATON_MPI_CHECK(MPI_Isend(buf.data(), static_cast<int>(buf.size()), MPI_INT, peer, kTag, comm_, &req)).ok())
    req = MPI_REQUEST_NULL;
}

void Heartbeat::Receive(Clock::time_point now) {
  for (;;) {
    if (recv_ == MPI_REQUEST_NULL &&
        !BATON_MPI_CHECK(MPI_Irecv(recv_buf_.data(), static_cast<int>(recv_buf_.size()), MPI_INT,
                                   rank_ == 0 ? MPI_ANY_SOURCE : 0, kTag, comm_, &recv_))
             .ok()) {
      recv_ = MPI_REQUEST_NULL;
      return;
    }
    int done = 0;
    MPI_Status st;
    if (!BATON_MPI_CHECK(MPI_Test(&recv_, &done, &st)).ok() || !done) return;
    recv_ = MPI_REQUEST_NULL;
    const int from = st.MPI_SOURCE;
    if (from < 0 || from >= size_) continue;
    last_seen_[static_cast<size_t>(from)] = now;
    if (recv_buf_[0] == kBye) {
      departed_[static_cast<size_t>(from)] = true;
      if (from == 0) relayed_.clear();
    } else if (rank_ != 0) {
      const int n = std::clamp(recv_buf_[1], 0, size_);
      relayed_.assign(recv_buf_.begin() + 2, recv_buf_.begin() + 2 + n);
    }
  }
}

void Heartbeat::UpdateView(Clock::time_point now) {
  const auto limit = 2 * interval_;
  auto silent_for = [&](int r) -> bool {
    return !departed_[static_cast<size_t>(r)] && now - last_seen_[static_cast<size_t>(r)] > limit;
  };
  std::vector<int> view;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r)
      if (silent_for(r)) view.push_back(r);
  } else {
    view = relayed_;
    if (silent_for(0)) view.push_back(0);
    std::sort(view.begin(), view.end());
    view.erase(std::unique(view.begin(), view.end()), view.end());
  }
  if (view == own_view_) return;
  // Rank 0 reports everyone; the others only what they watch themselves
  // (rank 0), so that one silent rank is not logged by every rank.
  for (int r : view) {
    if (!std::binary_search(own_view_.begin(), own_view_.end(), r) && (rank_ == 0 || r == 0)) {
      BATON_LOG(kRuntime, warning) << "rank " << r << " (" << hosts_[static_cast<size_t>(r)]
                                   << ") has not answered heartbeats for "
                                   << Seconds(now - last_seen_[static_cast<size_t>(r)]);
    }
  }
  for (int r : own_view_) {
    if (!std::binary_search(view.begin(), view.end(), r) && (rank_ == 0 || r == 0)) {
      BATON_LOG(kRuntime, info) << "rank " << r << " (" << hosts_[static_cast<size_t>(r)]
                                << ") answers heartbeats again";
    }
  }
  own_view_ = view;
  {
    std::lock_guard<std::mutex> lock(mu_);
    silent_ = view;
  }
  // Tell the others at once rather than at the next beat.
  if (rank_ == 0)
    for (int r = 1; r < size_; ++r)
      if (!departed_[static_cast<size_t>(r)]) Send(r, kBeat, own_view_);
}

void Heartbeat::Loop() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(interval_);
  const auto poll = std::clamp<Clock::duration>(interval / 20, std::chrono::milliseconds(1),
                                                std::chrono::milliseconds(50));
  Clock::time_point next_beat = Clock::now();
  // An error in this thread's calls (BATON_MPI_CHECK) or any other marks
  // MPI failed: the thread then ends at once, without its goodbyes (no MPI
  // call may follow; the others see this rank go silent, as if it died).
  while (!stop_.load()) {
    if (mpi::Failed()) return;
    Clock::time_point now = Clock::now();
    Receive(now);
    if (now >= next_beat) {
      if (rank_ == 0) {
        for (int r = 1; r < size_; ++r)
          if (!departed_[static_cast<size_t>(r)]) Send(r, kBeat, own_view_);
      } else {
        Send(0, kBeat, {});
      }
      next_beat += interval;
      if (next_beat < now) next_beat = now + interval;  // after a SIGSTOP: no burst of beats
    }
    UpdateView(now);
    std::this_thread::sleep_for(poll);
  }
  // Goodbye, so that a rank leaving normally is not reported silent; and
  // drain, so that no beat is left in flight when the communicator is
  // freed: MPI may give a freed context id to a later communicator, which
  // would then receive the stale beat. The others say goodbye to rank 0
  // and read until rank 0's goodbye, which rank 0 sends last, once it has
  // everyone's (or the drain time passed: a dead rank says nothing).
  const Clock::time_point drain_until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(drain_seconds_));
  auto drained = [&]() -> bool {
    if (rank_ != 0) return departed_[0];
    for (int r = 1; r < size_; ++r)
      if (!departed_[static_cast<size_t>(r)]) return false;
    return true;
  };
  if (rank_ != 0) Send(0, kBye, {});
  while (!drained() && Clock::now() < drain_until) {
    if (mpi::Failed()) return;
    Receive(Clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (mpi::Failed()) return;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      MPI_Request& req = sends_[static_cast<size_t>(r)];
      // The goodbye must go even if the last beat is still in flight.
      if (req != MPI_REQUEST_NULL) mpi::Deadline(0.2).Wait(&req, 1).ok();
      Send(r, kBye, {});
    }
  }
  if (mpi::Failed()) return;
  if (recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&recv_);
    MPI_Wait(&recv_, MPI_STATUS_IGNORE);  // a cancelled receive completes locally
  }
  for (size_t p = 0; p < sends_.size(); ++p) {
    if (sends_[p] == MPI_REQUEST_NULL) continue;
    int done = 0;
    if (!BATON_MPI_CHECK(MPI_Test(&sends_[p], &done, MPI_STATUS_IGNORE)).ok()) return;
    if (done) continue;
    // A peer that takes nothing must not hold us: abandon the send. MPI
    // may still read its buffer, so the buffer is leaked, not freed.
    MPI_Request_free(&sends_[p]);
    new std::vector<int>(std::move(send_bufs_[p]));
  }
}

}  // namespace baton
