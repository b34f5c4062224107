// Heartbeats: a thread per rank, on its own duplicate of the world
// communicator, that notices ranks that stopped answering (dead, SIGSTOPped,
// stuck in the kernel) without waiting for the training thread.
//
// Star with rank 0 as the monitor: every `interval` each rank sends rank 0
// a beat, and rank 0 sends every rank a beat that carries its view (the
// ranks it finds silent). A rank silent for more than 2 intervals is
// "silent": rank 0 sees it within 2 intervals (plus one poll, interval/20)
// and sends its new view at once, so the others learn it within about the
// same time; every rank watches rank 0 itself. 2 messages per rank per
// interval, none between other pairs (no full mesh of connections).
//
// Every MPI call here is non-blocking and only tested, never waited on: a
// send to a dead peer that never completes is not repeated (one beat in
// flight per peer) and is abandoned at Stop, so the thread always stops.
// Stop() says goodbye first, so that a rank leaving normally is not
// reported as silent. Needs MPI_THREAD_MULTIPLE.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/status.h"

namespace baton {

class Heartbeat {
 public:
  // Dups `world` (collective) and starts the thread. hosts[r]: rank r's
  // host. Stop waits at most `drain_seconds` for the others' goodbyes.
  static Status Start(MPI_Comm world, double interval_seconds, double drain_seconds,
                      std::vector<std::string> hosts, std::unique_ptr<Heartbeat>* out);
  ~Heartbeat();  // Stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Says goodbye, stops the thread, frees the communicator. Not collective,
  // but when every rank stops, each waits (at most the drain time) until
  // the beats in flight are read, so that the freed communicator leaves
  // nothing behind. Called by ~Runtime.
  void Stop();

  // The silent ranks as this rank knows them, ascending. Any thread.
  std::vector<int> Silent() const;

 private:
  Heartbeat() = default;
  void Loop();
  void Send(int peer, int kind, const std::vector<int>& ranks);
  void Receive(std::chrono::steady_clock::time_point now);
  void UpdateView(std::chrono::steady_clock::time_point now);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::chrono::duration<double> interval_{1.0};
  double drain_seconds_ = 2;
  std::vector<std::string> hosts_;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  // Thread-owned state.
  std::vector<std::chrono::steady_clock::time_point> last_seen_;  // by rank (rank 0: all; others: [0])
  std::vector<bool> departed_;
  std::vector<MPI_Request> sends_;  // one beat in flight per peer
  std::vector<std::vector<int>> send_bufs_;
  std::vector<int> recv_buf_;
  MPI_Request recv_ = MPI_REQUEST_NULL;
  std::vector<int> relayed_;  // rank 0's view, as last received (ranks != 0)
  std::vector<int> own_view_;

  mutable std::mutex mu_;
  std::vector<int> silent_;  // what Silent() returns
};

}  // namespace baton
