// baton-train: the main job of baton, end to end. Data-parallel training of
// a small MLP that survives node failure, preemption and requeue: every rank
// computes gradients on its part of the global batch, the gradients are
// averaged through a Bucketer, a checkpoint is saved every --ckpt-every
// steps, and a stop agreed by all ranks (time limit, preemption, requeue)
// saves and exits 75 so that Slurm runs the job again; the new run resumes
// from the newest checkpoint and ends with the same weights, bit for bit, as
// a run that was never interrupted. Uses only baton's public API.
//
// Determinism: every rank holds identical weights; a step's arithmetic
// depends only on the weights, the samples (the cursor) and the dropout
// RNG, all checkpointed; and the gradient sum uses the ring algorithm,
// pinned explicitly, whose order of additions depends only on the world
// size and the element count: not on timing (as the auto tuner's choice
// does), nor on the placement of ranks on nodes (as hierarchical does),
// nor on which algorithm MPI's own all-reduce picks inside.
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
#include "mlp.h"
#include "options.h"
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
  Rng dropout_{0, 0};
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
  if (static_cast<uint64_t>(world) * o_.batch > data_.samples) {
    // The same decision on every rank, so no rank waits for another.
    if (rank == 0)
      std::fprintf(stderr, "baton-train: --batch %u x %d ranks = %llu samples a step, more than the %llu of --data %s\n",
                   o_.batch, world, static_cast<unsigned long long>(o_.batch) * world,
                   static_cast<unsigned long long>(data_.samples), o_.data.c_str());
    return kExitUsage;
  }

  // mpi backend (CPU only in this example), ring pinned: see the top.
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
  dropout_ = Rng(o_.seed, DropoutStream(rank));
  if (baton::Status s = TrainState::Create(*rt_, o_.ckpt_dir, model_.get(), &dropout_, &state_); !s.ok())
    return Fail(s, "opening the checkpoint directory " + o_.ckpt_dir);
  if (int rc = Restore(facts_); rc >= 0) return rc;

  Sampler sampler(data_, o_.seed, world, rank, o_.batch);
  std::vector<uint64_t> idx;
  float loss = 0;
  std::vector<baton::BucketArray> reduce;
  for (const Tensor& g : model_->grads()) reduce.push_back({g.data->data(), g.data->size(), baton::DType::kF32});
  reduce.push_back({&loss, 1, baton::DType::kF32});  // the mean loss rides in the last bucket

  const auto run_start = Clock::now();
  const int64_t first_step = step_ + 1;
  while (step_ < o_.steps) {
    const int64_t step = step_ + 1;
    const auto t0 = Clock::now();
    rt_->BeginStep(step);
    sampler.Next(&cursor_, &idx);
    loss = model_->ForwardBackward(data_, idx, &dropout_);
    BusyWork(o_.step_ms);
    if (baton::Status s = bucketer.AllReduce(reduce, baton::ReduceOp::kAvg); !s.ok())
      return Fail(s, "reducing the gradients of step " + std::to_string(step));
    model_->Update(static_cast<float>(o_.lr), static_cast<float>(kMomentum));
    if (baton::Status s = rt_->EndStep(loss); !s.ok()) return Fail(s, "ending step " + std::to_string(step));
    step_ = step;
    // time: wall clock (Unix seconds), so a fault's cost can be read off the log.
    Say("step=%lld loss=%.6f epoch=%llu offset=%llu ms=%.1f time=%.3f\n", static_cast<long long>(step), loss,
        static_cast<unsigned long long>(cursor_.epoch), static_cast<unsigned long long>(cursor_.offset),
        Seconds(t0) * 1e3, UnixSeconds());

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
  if (baton::Status s = state_->Restore(&step, &saved, o_.restore_level); !s.ok())
    return Fail(s, "restoring from " + state_->dir() +
                       (s.code() == baton::Code::kInvalidArgument
                            ? " (a checkpoint of other options or another world size? start in a new --ckpt-dir)"
                            : ""));
  Blob now;
  now.seed = o_.seed;
  now.data = data_.checksum;
  now.hidden = o_.hidden;
  now.batch = o_.batch;
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
  } else {
    Say("no checkpoint in %s: starting at step 1 (restart %d)\n", state_->dir().c_str(), facts.restart);
  }
  const int stalled = RestartsWithoutProgress(newest, facts);
  if (stalled > o_.max_restarts) {
    if (rt_->rank() == 0) {
      const std::string from = step ? "step " + std::to_string(*step) : std::string("no checkpoint");
      // stdout and stderr: the job's output file has both; train.sbatch
      // copies the stdout line into the job's comment.
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
  b.batch = o_.batch;
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
