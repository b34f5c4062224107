// baton-train: the main job of baton, end to end. Data-parallel training of
// a small MLP that survives node failure, preemption and requeue: every rank
// computes gradients on its block of the global batch's micro-batches, the
// gradients are summed across ranks, a checkpoint is saved every --ckpt-every
// steps, and a stop agreed by all ranks (time limit, preemption, requeue)
// saves and exits 75 so that Slurm runs the job again; the new run resumes
// from the newest checkpoint and ends with the same weights, bit for bit, as
// a run that was never interrupted, at any world size. Uses only baton's
// public API.
//
// Determinism, whatever the world size: every rank holds identical weights;
// the global batch is split into --micro-batches micro-batches whose
// samples (the cursor), dropout streams (one per micro-batch, checkpointed
// and resharded) and arithmetic depend only on their index, never on the
// rank that computes them; and their gradients are added in micro-batch
// order (OrderedSum), not in an order a ring, a tree or MPI picks from the
// world size, the placement or the timing. --reduce ring trades that for
// baton's ring all-reduce (pinned, so its order depends only on the world
// size): the same bits at the same world size only.
//
// See baton-train(1) and docs/recovery.md.
#include <baton/bucketer.h>
#include <baton/communicator.h>
#include <baton/runtime.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdarg>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataset.h"
#include "exit_codes.h"
#include "hash.h"
#include "micro_batches.h"
#include "mlp.h"
#include "options.h"
#include "ordered_sum.h"
#include "progress.h"
#include "rng.h"
#include "train_state.h"

namespace train {
namespace {

using Clock = std::chrono::steady_clock;

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Printed by every rank: before MPI starts no rank knows who prints, and a
// launcher that ends the job at the first non-zero exit (mpirun) may drop a
// rank's last output; a few identical lines are better than none.
int UsageError(const std::string& error) {
  std::fprintf(stderr, "baton-train: %s (baton-train --help lists the options)\n", error.c_str());
  return kExitUsage;
}

// Ends the run on a failed Status: what cannot get better by running again
// is an error; everything else (deadlines, I/O, another rank's failure)
// asks Slurm to requeue the job.
int Fail(const baton::Status& s, const std::string& doing) {
  std::fprintf(stderr, "baton-train: %s: %s\n", doing.c_str(), s.ToString().c_str());
  baton::Runtime::RecordFailure(doing + ": " + s.ToString());  // for `baton report`
  switch (s.code()) {
    case baton::Code::kInvalidArgument:
    case baton::Code::kNotFound:
    case baton::Code::kCorruption:
    case baton::Code::kInternal:
      return kExitError;
    default:
      return kExitRequeue;
  }
}

// The signals that ask for an agreed stop (SIGTERM, and SIGUSR2 or SIGUSR1 as
// BATON_STOP_SIGNAL). Blocked from the start of main until the runtime has
// installed its handlers: a stop asked for while the data loads or MPI starts
// (a time-limit signal early in a requeued run) is held and then agreed on,
// instead of killing the rank with the signal's default action. Threads
// started meanwhile (MPI's) inherit the mask, so the signal waits for the
// main thread.
const sigset_t& HeldSignals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGTERM, SIGUSR1, SIGUSR2}) sigaddset(&s, sig);
    return s;
  }();
  return set;
}

// --step-ms: compute, not sleep, so the step keeps a core busy as a larger
// model would (and a stopped or slow rank looks as it would in a real job).
void BusyWork(double ms) {
  if (ms <= 0) return;
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  uint64_t x = 1;
  while (Clock::now() < end)
    for (int i = 0; i < 4096; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  volatile uint64_t sink = x;
  (void)sink;
}

uint64_t WeightsChecksum(Mlp& model) {
  Hasher h;
  for (const Tensor& t : model.params()) h.Update(t.data->data(), t.data->size() * sizeof(float));
  return h.Digest();
}

class Job {
 public:
  Job(const Options& o, const Dataset& data) : o_(o), data_(data) {}
  int Run(int* argc, char*** argv);

 private:
  void Say(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  int Restore(const RunFacts& facts);
  int Save(int64_t step, bool async = false);
  int Finish();

  const Options& o_;
  const Dataset& data_;
  std::unique_ptr<baton::Runtime> rt_;
  std::unique_ptr<baton::Communicator> comm_;
  std::unique_ptr<Mlp> model_;
  std::unique_ptr<TrainState> state_;
  Share share_;                // this rank's micro-batches
  std::vector<Rng> dropout_;   // theirs, in order
  Cursor cursor_;
  RunFacts facts_;
  int64_t step_ = 0;  // optimizer steps done
  int64_t saved_step_ = -1;
  int saves_ = 0;
  double save_seconds_ = 0;
};

void Job::Say(const char* fmt, ...) {
  if (rt_->rank() != 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);  // a killed run's output ends where it ended
}

int Job::Run(int* argc, char*** argv) {
  if (baton::Status s = RunFacts::FromEnvironment(&facts_); !s.ok()) return Fail(s, "reading the job's facts");
  baton::Status created = baton::Runtime::Create(argc, argv, {}, &rt_);
  // The runtime's stop handlers are in place (or it failed): take the stop
  // signals held since main began.
  pthread_sigmask(SIG_UNBLOCK, &HeldSignals(), nullptr);
  if (!created.ok()) return Fail(created, "starting the runtime");
  const int world = rt_->size(), rank = rt_->rank();
  if (static_cast<uint64_t>(world) > o_.micro_batches) {
    // The same decision on every rank, so no rank waits for another.
    if (rank == 0)
      std::fprintf(stderr, "baton-train: %d ranks for --micro-batches %u: a rank would have no micro-batch; "
                           "run at most %u ranks or give more micro-batches\n",
                   world, o_.micro_batches, o_.micro_batches);
    return kExitUsage;
  }

  // mpi backend (CPU only in this example), ring pinned for --reduce ring: see the top.
  baton::CommOptions co;
  co.backend = baton::Backend::kMpi;
  co.algorithm = baton::Algorithm::kRing;
  co.ring_chunk_bytes = size_t{1} << 20;
  co.on_timeout = baton::OnTimeout::kExit;  // a dead peer: exit 75 at the deadline
  if (baton::Status s = baton::CreateCommunicator(*rt_, co, &comm_); !s.ok()) return Fail(s, "creating the communicator");
  // A fixed bucket size and a fixed list: the same reductions in the same order every run.
  baton::BucketerOptions bo;
  bo.bucket_bytes = size_t{1} << 20;
  baton::Bucketer bucketer(comm_.get(), bo);

  model_ = std::make_unique<Mlp>(data_.features, o_.hidden, data_.classes);
  model_->Init(o_.seed);
  share_ = ShareOf(o_.micro_batches, world, rank);
  for (uint32_t q = 0; q < share_.count; ++q) dropout_.emplace_back(o_.seed, DropoutStream(share_.first + q));
  if (baton::Status s = TrainState::Create(*rt_, o_.ckpt_dir, o_.ckpt_level2, model_.get(), &dropout_, share_,
                                           o_.micro_batches, &state_);
      !s.ok())
    return Fail(s, "opening the checkpoint directory " + o_.ckpt_dir);
  if (int rc = Restore(facts_); rc >= 0) return rc;

  Sampler sampler(data_, o_.seed, o_.global_batch);
  const uint32_t micro = o_.global_batch / o_.micro_batches;  // samples of a micro-batch
  std::vector<uint64_t> batch, idx;
  // One micro-batch's gradients, flat in grads() order, then its summed
  // loss; `local` this rank's micro-batches summed in order (--reduce ring,
  // --compare-reduce), all-reduced in place by the ring; `ordered_total`
  // OrderedSum's sum over every micro-batch.
  const std::vector<Tensor> grads = model_->grads();
  size_t n = 1;
  for (const Tensor& g : grads) n += g.data->size();
  std::vector<float> flat(n), local(n), ordered_total(n);
  OrderedSum ordered(comm_.get(), o_.micro_batches, n);
  const bool ring = o_.reduce == Options::Reduce::kRing;
  const std::vector<float>& total = ring ? local : ordered_total;
  const std::vector<baton::BucketArray> ring_arrays = {{local.data(), n, baton::DType::kF32}};
  double compute_seconds = 0, reduce_seconds = 0, other_reduce_seconds = 0;

  const auto run_start = Clock::now();
  const int64_t first_step = step_ + 1;
  Progress progress(o_.steps, step_, o_.progress_seconds);
  while (step_ < o_.steps) {
    const int64_t step = step_ + 1;
    const auto t0 = Clock::now();
    rt_->BeginStep(step);
    sampler.Next(&cursor_, &batch);
    for (uint32_t q = 0; q < share_.count; ++q) {
      const auto from = batch.begin() + static_cast<std::ptrdiff_t>(size_t{share_.first + q} * micro);
      idx.assign(from, from + micro);
      const double loss_sum = model_->ForwardBackward(data_, idx, &dropout_[q], o_.global_batch);
      size_t at = 0;
      for (const Tensor& g : grads) at = std::copy(g.data->begin(), g.data->end(), flat.begin() + at) - flat.begin();
      flat[at] = static_cast<float>(loss_sum);
      if (!ring || o_.compare_reduce) ordered.Put(q, flat.data());
      if (ring || o_.compare_reduce) {
        if (q == 0)
          local = flat;
        else
          for (size_t i = 0; i < n; ++i) local[i] += flat[i];
      }
    }
    BusyWork(o_.step_ms);
    const auto t_reduce = Clock::now();
    compute_seconds += std::chrono::duration<double>(t_reduce - t0).count();
    // --compare-reduce: the other reduction of the same gradients, timed
    // and dropped: the two costs side by side in one run, free of the
    // load's drift. A barrier first, or the first reduction would also time
    // the wait for the slowest rank's compute; the order alternates.
    const bool other_first = o_.compare_reduce && step % 2 == 0;
    auto other = [&]() -> baton::Status {
      const auto t = Clock::now();
      baton::Status st = ring ? ordered.Sum(&ordered_total) : bucketer.AllReduce(ring_arrays, baton::ReduceOp::kSum);
      other_reduce_seconds += Seconds(t);
      return st.Annotate("the compared reduction");
    };
    if (o_.compare_reduce)
      if (baton::Status s = comm_->Barrier(); !s.ok()) return Fail(s, "the barrier before comparing reductions");
    baton::Status reduced = other_first ? other() : baton::Status::OK();
    if (reduced.ok()) {
      const auto t_mine = Clock::now();
      reduced = ring ? bucketer.AllReduce(ring_arrays, baton::ReduceOp::kSum) : ordered.Sum(&ordered_total);
      reduce_seconds += Seconds(t_mine);
    }
    if (reduced.ok() && o_.compare_reduce && !other_first) reduced = other();
    if (!reduced.ok()) return Fail(reduced, "reducing the gradients of step " + std::to_string(step));
    size_t at = 0;
    for (const Tensor& g : grads) {
      std::copy(total.begin() + static_cast<std::ptrdiff_t>(at),
                total.begin() + static_cast<std::ptrdiff_t>(at + g.data->size()), g.data->begin());
      at += g.data->size();
    }
    const float loss = total[at] / static_cast<float>(o_.global_batch);
    model_->Update(static_cast<float>(o_.lr), static_cast<float>(kMomentum));
    if (baton::Status s = rt_->EndStep(loss); !s.ok()) return Fail(s, "ending step " + std::to_string(step));
    step_ = step;
    if (o_.progress_seconds == 0) {
      // time: wall clock (Unix seconds), so a fault's cost can be read off the log.
      Say("step=%lld loss=%.6f epoch=%llu offset=%llu ms=%.1f time=%.3f\n", static_cast<long long>(step), loss,
          static_cast<unsigned long long>(cursor_.epoch), static_cast<unsigned long long>(cursor_.offset),
          Seconds(t0) * 1e3, UnixSeconds());
    } else if (std::string line; progress.Due(step, loss, &line)) {
      Say("%s\n", line.c_str());
    }

    // One agreement per step: true on every rank at the same step once any
    // rank got the stop signal (SIGUSR2: time limit) or SIGTERM (preemption,
    // scontrol requeue).
    bool stop = false;
    if (baton::Status s = rt_->ShouldStop(&stop); !s.ok()) return Fail(s, "agreeing on a stop");
    const bool last = step == o_.steps;
    if (stop && o_.ckpt_async) {
      // The save in flight gets a bounded time (Slurm's grace period is
      // short); the stop's own save below is synchronous.
      if (baton::Status s = state_->FinishOrAbandon(o_.ckpt_stop_seconds); !s.ok())
        Say("at the stop: %s\n", s.ToString().c_str());
    }
    if (stop || last) {
      if (int rc = Save(step); rc >= 0) return rc;
    } else if (o_.ckpt_every > 0 && step % o_.ckpt_every == 0) {
      if (int rc = Save(step, o_.ckpt_async); rc >= 0) return rc;
    }
    if (stop && !last) {
      Say("stop agreed at step %lld: checkpoint saved, exiting %d to be requeued\n", static_cast<long long>(step),
          kExitRequeue);
      return kExitRequeue;
    }
  }
  const double seconds = Seconds(run_start);
  const int64_t ran = step_ - first_step + 1;
  // The step rate with the saves and, from the same run, without their time:
  // one run measures what checkpoints cost, free of the load drift between
  // two runs on a shared machine.
  const double train_seconds = seconds - save_seconds_;
  if (o_.compare_reduce && ran > 0) {
    // Step rates of compute plus each reduction, as if run alone.
    const double ms = 1e3 / static_cast<double>(ran);
    const double ordered_ms = (ring ? other_reduce_seconds : reduce_seconds) * ms;
    const double ring_ms = (ring ? reduce_seconds : other_reduce_seconds) * ms;
    const double compute_ms = compute_seconds * ms;
    Say("compare-reduce ranks=%d micro_batches=%u elements=%zu compute_ms=%.2f ordered_ms=%.3f ring_ms=%.3f "
        "steps_per_s_ordered=%.2f steps_per_s_ring=%.2f rate_lost=%.1f%%\n",
        rt_->size(), o_.micro_batches, n, compute_ms, ordered_ms, ring_ms, 1e3 / (compute_ms + ordered_ms),
        1e3 / (compute_ms + ring_ms), 100.0 * (1.0 - (compute_ms + ring_ms) / (compute_ms + ordered_ms)));
  }
  Say("done steps=%lld this_run=%lld seconds=%.2f steps_per_s=%.2f saves=%d save_seconds=%.3f "
      "steps_per_s_without_saves=%.2f ckpt_ratio=%.3f\n",
      static_cast<long long>(step_), static_cast<long long>(ran), seconds, seconds > 0 ? ran / seconds : 0.0, saves_,
      save_seconds_, train_seconds > 0 ? ran / train_seconds : 0.0, seconds > 0 ? train_seconds / seconds : 0.0);
  return Finish();
}

// Returns an exit code to end with, or -1 to train.
int Job::Restore(const RunFacts& facts) {
  std::optional<int64_t> step;
  Blob saved;
  baton::RestoreResult restored;
  baton::Status s = state_->Restore(&step, &saved, o_.restore_level, &restored);
  // Why node-local copies were passed over, before the resume line (which
  // scripts match whole).
  if (restored.level2_fallback) {
    const baton::SkippedVersion& f = *restored.level2_fallback;
    Say("level 2: node-local copy %s of step %lld not restored (%s); %s\n", f.path.c_str(),
        static_cast<long long>(f.step), f.reason.ToString().c_str(),
        s.ok() && restored.level == 3 ? "restored from level 3 (the shared directory)" : "tried level 3");
  }
  if (!s.ok())
    return Fail(s, "restoring from " + state_->dir() +
                       (s.code() == baton::Code::kInvalidArgument
                            ? " (a checkpoint of other options or of an older baton-train? start in a new --ckpt-dir)"
                            : ""));
  Blob now;
  now.seed = o_.seed;
  now.data = data_.checksum;
  now.hidden = o_.hidden;
  now.global_batch = o_.global_batch;
  now.micro_batches = o_.micro_batches;
  now.reduce = o_.reduce == Options::Reduce::kRing ? "ring" : "ordered";
  now.lr = o_.lr;
  now.world = rt_->size();
  std::optional<Blob> newest;
  if (step) {
    if (std::string d = saved.Differences(now); !d.empty()) {
      if (rt_->rank() == 0)
        std::fprintf(stderr, "baton-train: the checkpoint of step %lld in %s was made with %s; resuming it would "
                             "not continue that run: give the same options, or another --ckpt-dir\n",
                     static_cast<long long>(*step), state_->dir().c_str(), d.c_str());
      return kExitUsage;
    }
    newest = saved;
    step_ = *step;
    saved_step_ = *step;
    cursor_ = saved.cursor;
    Say("resumed from step %lld (restart %d)\n", static_cast<long long>(*step), facts.restart);
    if (saved.world != rt_->size())
      Say("saved by %d ranks, resumed by %d: this rank computes micro-batches %u..%u of %u\n", saved.world,
          rt_->size(), share_.first, share_.first + share_.count - 1, o_.micro_batches);
  } else {
    Say("no checkpoint in %s: starting at step 1 (restart %d)\n", state_->dir().c_str(), facts.restart);
  }
  const int stalled = RestartsWithoutProgress(newest, facts);
  if (stalled > o_.max_restarts) {
    if (rt_->rank() == 0) {
      const std::string from = step ? "step " + std::to_string(*step) : std::string("no checkpoint");
      // stdout and stderr: the job's output file has both; baton run
      // (train.sbatch) copies the stderr line, its last, into the job's comment.
      char msg[512];
      std::snprintf(msg, sizeof msg,
                    "restart cap: %d restart(s) in a row found no newer checkpoint than %s (--max-restarts %d); "
                    "stopping without requeue",
                    stalled, from.c_str(), o_.max_restarts);
      std::printf("%s\n", msg);
      std::fflush(stdout);
      // A new job counts its own restarts: submitting again resumes.
      std::fprintf(stderr, "baton-train: %s (job %s). Find the cause in this output, then resume by hand: "
                           "submit the job again (sbatch) with the same options and checkpoint directory.\n",
                   msg, facts.job.empty() ? "-" : facts.job.c_str());
    }
    return kExitRestartCap;
  }
  return -1;
}

int Job::Save(int64_t step, bool async) {
  if (saved_step_ == step) return -1;
  Blob b;
  b.cursor = cursor_;
  b.seed = o_.seed;
  b.data = data_.checksum;
  b.hidden = o_.hidden;
  b.global_batch = o_.global_batch;
  b.micro_batches = o_.micro_batches;
  b.reduce = o_.reduce == Options::Reduce::kRing ? "ring" : "ordered";
  b.lr = o_.lr;
  b.world = rt_->size();
  b.saved_by = facts_;
  if (baton::Status s = state_->Save(step, b, async); !s.ok())
    return Fail(s, "saving step " + std::to_string(step));
  saved_step_ = step;
  const baton::CheckpointStats& st = state_->last_stats();
  ++saves_;
  save_seconds_ += st.seconds;
  // async: seconds is the time SaveAsync blocked (the previous save's
  // commit included); the version is committed at the next save.
  Say("checkpoint step=%lld bytes=%llu seconds=%.3f%s\n", static_cast<long long>(step),
      static_cast<unsigned long long>(st.total_bytes), st.seconds, async ? " async" : "");
  return -1;
}

// Every rank prints the checksum of its weights after checking that all
// ranks hold the same ones.
int Job::Finish() {
  const uint64_t mine = WeightsChecksum(*model_);
  std::vector<uint64_t> all(static_cast<size_t>(rt_->size()));
  if (baton::Status s = comm_->AllGather(&mine, all.data(), 1, baton::DType::kI64); !s.ok())
    return Fail(s, "gathering the checksums");
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine) {
      std::fprintf(stderr, "baton-train: rank %d's weights (%s) differ from rank %zu's (%s)\n", rt_->rank(),
                   Hex64(mine).c_str(), r, Hex64(all[r]).c_str());
      return kExitError;
    }
  std::printf("final_checksum=%s\n", Hex64(mine).c_str());
  std::fflush(stdout);
  return kExitDone;
}

int MakeData(const Options& o) {
  if (baton::Status s = MakeDataset(o.make_data, o.samples, o.features, o.classes, o.seed); !s.ok()) {
    std::fprintf(stderr, "baton-train: %s\n", s.ToString().c_str());
    return kExitError;
  }
  Dataset d;
  if (baton::Status s = LoadDataset(o.make_data, &d); !s.ok()) {
    std::fprintf(stderr, "baton-train: reading back %s: %s\n", o.make_data.c_str(), s.ToString().c_str());
    return kExitError;
  }
  std::printf("wrote %s: %llu samples x %u features, %u classes, seed %llu, checksum %s\n", o.make_data.c_str(),
              static_cast<unsigned long long>(d.samples), d.features, d.classes,
              static_cast<unsigned long long>(d.seed), Hex64(d.checksum).c_str());
  return kExitDone;
}

}  // namespace
}  // namespace train

int main(int argc, char** argv) {
  using namespace train;
  Options o;
  std::string error;
  if (!ParseOptions(argc, argv, &o, &error)) return UsageError(error);
  if (o.help) {
    std::printf("%s", Usage());
    return kExitDone;
  }
  if (!o.make_data.empty()) return MakeData(o);
  pthread_sigmask(SIG_BLOCK, &HeldSignals(), nullptr);
  // The data set is read and checked before MPI starts: a bad --data costs
  // no collective work.
  Dataset data;
  if (baton::Status s = LoadDataset(o.data, &data); !s.ok()) {
    if (s.code() == baton::Code::kInvalidArgument) return UsageError(s.message());
    std::fprintf(stderr, "baton-train: %s\n", s.ToString().c_str());
    return kExitError;
  }
  if (o.global_batch > data.samples)
    return UsageError("--global-batch " + std::to_string(o.global_batch) + " is more than the " +
                      std::to_string(data.samples) + " samples of --data " + o.data);
  Job job(o, data);
  const int rc = job.Run(&argc, &argv);
  // The exit code is decided, the same on every rank (a restart cap, an
  // agreed stop, done). srun -K sends SIGTERM to the ranks still running
  // when the first one exits non-zero; the runtime's teardown (in ~Job)
  // restores the default action, and a rank it reached there would end
  // with 143, which srun reports over the 3 of the others: the job would
  // be requeued past its restart cap. Hold the signals from here on.
  pthread_sigmask(SIG_BLOCK, &HeldSignals(), nullptr);
  return rc;
}
