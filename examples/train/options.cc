#include "options.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>

namespace train {
namespace {

std::string Quote(const std::string& v) { return "'" + v + "'"; }

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Whole-string integer in [lo, hi].
bool ParseInt(const std::string& name, const std::string& v, long long lo, long long hi, long long* out,
              std::string* error) {
  long long x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi) {
    *error = name + ": " + Quote(v) + " is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
  }
  *out = x;
  return true;
}

bool ParseDouble(const std::string& name, const std::string& v, double lo, bool lo_open, double hi, double* out,
                 std::string* error) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const bool in = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (v.empty() || *end != '\0' || errno == ERANGE || !in) {
    *error = name + ": " + Quote(v) + " is not a number in " + (lo_open ? "(" : "[") + Num(lo) + ", " + Num(hi) + "]";
    return false;
  }
  *out = x;
  return true;
}

}  // namespace

const char* Usage() {
  return "usage: baton-train --data FILE [--steps N] [--ckpt-every N] [--ckpt-dir DIR] [--seed N]\n"
         "                   [--lr X] [--hidden N] [--global-batch N] [--micro-batches M]\n"
         "                   [--reduce ordered|ring] [--compare-reduce] [--step-ms X]\n"
         "                   [--max-restarts N] [--progress X]\n"
         "                   [--ckpt-mode sync|async] [--ckpt-stop-seconds X] [--restore-level auto|3]\n"
         "       baton-train --make-data FILE [--seed N] [--samples N] [--features N] [--classes N]\n"
         "       baton-train --help\n"
         "\n"
         "Data-parallel training of a two-layer MLP on a synthetic data set, with\n"
         "checkpoints that a requeued job resumes from, bit for bit. Run it with\n"
         "srun --mpi=pmix (examples/train.sbatch) or mpirun.\n"
         "\n"
         "  --data FILE         the data set (written by --make-data)\n"
         "  --steps N           optimizer steps of the whole run (default 200)\n"
         "  --ckpt-every N      checkpoint after every N-th step; 0: only at a stop and\n"
         "                      at the end (default 20)\n"
         "  --ckpt-dir DIR      checkpoint directory (default $BATON_CKPT_DIR)\n"
         "  --ckpt-mode M       sync: training waits for each save (default); async:\n"
         "                      the periodic saves are written in the background\n"
         "                      (SaveAsync) while the next steps run\n"
         "  --ckpt-stop-seconds X  async: at a stop, the save in flight gets this long\n"
         "                      to finish, else it is abandoned (default 30)\n"
         "  --seed N            weights, data, shuffles and dropout (default 1)\n"
         "  --lr X              SGD learning rate, momentum 0.9 (default 0.01)\n"
         "  --hidden N          hidden units (default 1024: 2 MiB of weights at 512 features)\n"
         "  --global-batch N    samples per optimizer step, over all ranks (default 96)\n"
         "  --micro-batches M   the global batch is split into M equal micro-batches,\n"
         "                      each with its own dropout stream and place in the data,\n"
         "                      whatever the world size; the ranks share them out in\n"
         "                      contiguous blocks (uneven allowed), so at most M ranks\n"
         "                      (default 12; must divide --global-batch)\n"
         "  --reduce R          ordered: the micro-batches' gradients are summed in\n"
         "                      micro-batch order, so the weights are the same bits at\n"
         "                      every world size and a run may resume at another one\n"
         "                      (default); ring: baton's ring all-reduce of each rank's\n"
         "                      sum, cheaper, the same bits only at the same world size\n"
         "  --compare-reduce    each step also runs the other --reduce on the same\n"
         "                      gradients (timed, result dropped); the end prints both\n"
         "                      costs and the step rate each gives (a benchmark)\n"
         "  --progress X        a progress line every X seconds (step of total, steps/s,\n"
         "                      ETA, loss); 0: a step=N line after every step (default 5)\n"
         "  --step-ms X         extra CPU-busy compute per step, ms (default 0)\n"
         "  --restore-level L   auto: restore from node-local copies ($BATON_LOCAL_DIR)\n"
         "                      when they hold the newest version the checkpoint\n"
         "                      directory still has, else from it (default); 3: from\n"
         "                      the checkpoint directory only\n"
         "  --max-restarts N    restarts in a row that find no newer checkpoint before\n"
         "                      the job gives up with exit 3 (default 3)\n"
         "  --make-data FILE    write the data set and exit; with --samples (8192),\n"
         "                      --features (512), --classes (10)\n"
         "\n"
         "Exit: 0 done; 1 error; 2 bad usage; 3 restart cap reached (do not requeue);\n"
         "75 stopped at an agreed step with a checkpoint saved, or a failure a new run\n"
         "may not meet (requeue me). See baton-train(1).\n";
}

bool ParseOptions(int argc, char** argv, Options* o, std::string* error) {
  long long n = 0;
  double x = 0;
  using Setter = std::function<bool(const std::string& name, const std::string& v)>;
  const long long kMaxSteps = std::numeric_limits<int64_t>::max() / 2;
  const std::map<std::string, Setter> takes_value = {
      {"--make-data", [&](const std::string&, const std::string& v) { o->make_data = v; return !v.empty(); }},
      {"--data", [&](const std::string&, const std::string& v) { o->data = v; return !v.empty(); }},
      {"--ckpt-dir", [&](const std::string&, const std::string& v) { o->ckpt_dir = v; return !v.empty(); }},
      {"--samples", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, 1LL << 32, &n, error) && (o->samples = static_cast<uint64_t>(n), true); }},
      {"--features", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, 1 << 16, &n, error) && (o->features = static_cast<uint32_t>(n), true); }},
      {"--classes", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 2, 1 << 16, &n, error) && (o->classes = static_cast<uint32_t>(n), true); }},
      {"--steps", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, kMaxSteps, &n, error) && (o->steps = n, true); }},
      {"--ckpt-every", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 0, kMaxSteps, &n, error) && (o->ckpt_every = n, true); }},
      {"--seed", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 0, std::numeric_limits<long long>::max(), &n, error) &&
                (o->seed = static_cast<uint64_t>(n), true); }},
      {"--lr", [&](const std::string& k, const std::string& v) {
         return ParseDouble(k, v, 0, true, 100, &x, error) && (o->lr = x, true); }},
      {"--hidden", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, 1 << 16, &n, error) && (o->hidden = static_cast<uint32_t>(n), true); }},
      {"--batch", [&](const std::string& k, const std::string& v) {
         // Its old meaning (samples per rank) made the numbers depend on the
         // world size: refused rather than silently read another way.
         *error = k + ": " + Quote(v) + ": --batch (samples per rank) is gone: give --global-batch N, the " +
                  "samples per step over all ranks (the old --batch times the ranks)";
         return false; }},
      {"--global-batch", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, 1 << 24, &n, error) && (o->global_batch = static_cast<uint32_t>(n), true); }},
      {"--micro-batches", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 1, 1 << 16, &n, error) && (o->micro_batches = static_cast<uint32_t>(n), true); }},
      {"--reduce", [&](const std::string& k, const std::string& v) {
         if (v != "ordered" && v != "ring") {
           *error = k + ": " + Quote(v) + " is not ordered or ring";
           return false;
         }
         o->reduce = v == "ring" ? Options::Reduce::kRing : Options::Reduce::kOrdered;
         return true; }},
      {"--progress", [&](const std::string& k, const std::string& v) {
         return ParseDouble(k, v, 0, false, 86400, &x, error) && (o->progress_seconds = x, true); }},
      {"--ckpt-mode", [&](const std::string& k, const std::string& v) {
         if (v != "sync" && v != "async") {
           *error = k + ": " + Quote(v) + " is not sync or async";
           return false;
         }
         o->ckpt_async = v == "async";
         return true; }},
      {"--ckpt-stop-seconds", [&](const std::string& k, const std::string& v) {
         return ParseDouble(k, v, 0, false, 3.6e6, &x, error) && (o->ckpt_stop_seconds = x, true); }},
      {"--step-ms", [&](const std::string& k, const std::string& v) {
         return ParseDouble(k, v, 0, false, 3.6e6, &x, error) && (o->step_ms = x, true); }},
      {"--restore-level", [&](const std::string& k, const std::string& v) {
         if (v != "auto" && v != "3") {
           *error = k + ": " + Quote(v) + " is not auto or 3";
           return false;
         }
         o->restore_level = v == "3" ? 3 : 0;
         return true; }},
      {"--max-restarts", [&](const std::string& k, const std::string& v) {
         return ParseInt(k, v, 0, 1000000, &n, error) && (o->max_restarts = static_cast<int>(n), true); }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      o->help = true;
      continue;
    }
    if (arg == "--compare-reduce") {
      o->compare_reduce = true;
      continue;
    }
    const size_t eq = arg.find('=');
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    auto it = takes_value.find(arg);
    if (it == takes_value.end()) {
      *error = "unknown option " + Quote(argv[i]);
      return false;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        *error = arg + ": needs a value";
        return false;
      }
      value = argv[++i];
    }
    error->clear();
    if (!it->second(arg, value)) {
      if (error->empty()) *error = arg + ": " + Quote(value) + " is not a valid value";
      return false;
    }
  }
  if (o->help) return true;
  if (!o->make_data.empty()) {
    if (!o->data.empty()) {
      *error = "--make-data and --data: give one (write a data set, or train on one)";
      return false;
    }
    return true;
  }
  if (o->data.empty()) {
    *error = "--data: missing (write a data set first with --make-data FILE)";
    return false;
  }
  if (o->global_batch % o->micro_batches != 0) {
    *error = "--micro-batches: " + Quote(std::to_string(o->micro_batches)) + " does not divide --global-batch " +
             std::to_string(o->global_batch) + " (micro-batches are of equal size)";
    return false;
  }
  if (o->ckpt_dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env == nullptr || *env == '\0') {
      *error = "--ckpt-dir: missing, and BATON_CKPT_DIR is not set";
      return false;
    }
    o->ckpt_dir = env;
  }
  return true;
}

}  // namespace train
