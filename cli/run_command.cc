// baton run: the job's step, launched with srun inside the allocation and,
// by how it ended, launched again there (a lost node: on a spare or on
// fewer nodes), ended with the program's own status (a bug: no relaunch, no
// requeue), or ended with exit 75 once (an agreed stop, a preemption, the
// time limit: Slurm is taking the allocation away). It replaces the bash
// loops the examples' batch scripts carried; the decision itself is
// base/launch/step_verdict.h. Every launch and its cause, and every step's
// end, go to the job's event log (docs/events.md) for `baton report`.
#include <boost/program_options.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/events/event_log.h"
#include "base/events/event_reader.h"
#include "base/events/step_end.h"
#include "base/launch/allocation_nodes.h"
#include "base/launch/decimal.h"
#include "base/launch/lost_nodes.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_queries.h"
#include "base/launch/step_verdict.h"
#include "base/launch/sweep_decision.h"
#include "baton/identity.h"
#include "cli/batch_event_log.h"
#include "cli/commands.h"
#include "cli/error_text.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;

// libslurm retries a missing controller for a minute; between two launches
// of a step, an answer that slow is no answer.
constexpr std::chrono::seconds kSlurmLimit(15);
// How long a step that ended as Slurm's ending of the job would end it
// (SIGTERM, exit 75, no node lost, no agreed stop) waits for Slurm's SIGTERM
// to reach baton run too: the tasks are signalled by their own slurmstepd,
// the batch script by the batch step's, and the step can be gone first.
constexpr std::chrono::milliseconds kSlurmSignalGrace(2000);
constexpr int kRequeue = 75;

volatile sig_atomic_t g_term = 0, g_usr2 = 0;
volatile pid_t g_srun = 0;

void OnSignal(int sig) {
  if (sig == SIGTERM) g_term = 1;
  if (sig == SIGUSR2) {
    g_usr2 = 1;
    // The time-limit signal (sbatch --signal=B:USR2@T) comes to the batch
    // script only: srun passes it on to every task.
    if (g_srun > 0) ::kill(g_srun, SIGUSR2);
  }
}

struct Options {
  long long step_nodes = 0, min_nodes = 0, max_restarts = 3, per_node = 0;
  std::string mpi = "pmix";
  std::vector<std::string> srun_args, program;
};

int Usage(const po::options_description& desc, const std::string& error) {
  std::cerr << "baton run: " << error << "\n" << desc;
  return 2;
}

// "[baton run 12:00:01 job 81 restart 0] ": the job's output holds every run's lines.
class Say {
 public:
  Say(std::string job, std::string restart) : job_(std::move(job)), restart_(std::move(restart)) {}
  void operator()(const std::string& text) const {
    char hms[16];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    std::strftime(hms, sizeof hms, "%H:%M:%S", &tm);
    // One write per line: srun's and the tasks' output interleave by lines.
    const std::string line = "[baton run " + std::string(hms) + " job " + job_ + " restart " + restart_ + "] " + text + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }

 private:
  std::string job_, restart_;
};

std::string Time() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", NowSeconds());
  return buf;
}

// What the step's ranks wrote in the event log (docs/events.md): failure
// records of an uncaught exception (a bug) and of a refused world size, and
// agreed stops. Counted in every rank file of the job; a step's own are the
// difference across it.
struct RankRecords {
  int uncaught = 0, refused = 0, stops = 0;
};

RankRecords CountRankRecords(const std::string& dir, const std::string& job) {
  RankRecords c;
  if (dir.empty()) return c;
  const std::string events = dir + "/events", prefix = job + "-r";
  for (int rank = 0;; ++rank) {
    std::ifstream in(events + "/" + prefix + std::to_string(rank) + ".jsonl");
    if (!in) break;  // ranks are numbered from 0 without gaps
    std::string line;
    while (std::getline(in, line)) {
      // Only the lines that can be a stop or a failure are parsed: a log holds a record per step.
      if (line.find("\"ev\":\"stop\"") == std::string::npos && line.find("\"ev\":\"failure\"") == std::string::npos)
        continue;
      events::Event e;
      if (!events::ParseEventLine(line, &e).ok()) continue;  // a line cut by a crash
      if (e.kind == "stop") ++c.stops;
      if (e.kind != "failure") continue;
      switch (launch::ClassifyFailure(e.failure_kind, e.what)) {
        case launch::FailureRecord::kUncaught: ++c.uncaught; break;
        case launch::FailureRecord::kRefused: ++c.refused; break;
        case launch::FailureRecord::kOther: break;
      }
    }
  }
  return c;
}

// Splits `args` into baton run's options and the program with its
// arguments: the program starts at the first word that is no option (or
// after `--`), so that its own options are never read as baton run's.
void SplitProgram(const std::vector<std::string>& args, std::vector<std::string>* own,
                  std::vector<std::string>* program) {
  static const char* const kWithValue[] = {"--step-nodes", "--min-nodes", "--max-restarts", "--ntasks-per-node",
                                           "--mpi", "--srun-arg"};
  size_t i = 0;
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    own->push_back(a);
    for (const char* name : kWithValue)
      if (a == name && i + 1 < args.size()) own->push_back(args[++i]);
    ++i;
  }
  program->assign(args.begin() + static_cast<long>(i), args.end());
}

// srun's stderr, passed on line by line to baton run's; its "srun: error:"
// lines (up to 4) are kept for the step_end record ("n2: task 1: Killed").
class SrunErrors {
 public:
  explicit SrunErrors(int fd) : fd_(fd), thread_([this] { Pump(); }) {}
  ~SrunErrors() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits for srun's end of the pipe to close; then the words.
  std::string Said() {
    if (thread_.joinable()) thread_.join();
    return said_;
  }
  // The step's last line on stderr that is its own (launch::IsLastWords; after Said()).
  const std::string& LastWords() const { return last_; }

 private:
  void Pump() {
    std::string buf;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) Line(buf.substr(0, nl + 1)), buf.erase(0, nl + 1);
    }
    if (!buf.empty()) Line(buf + "\n");
    ::close(fd_);
  }
  void Line(const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    if (line.compare(0, 12, "srun: error:") == 0 && kept_ < 4) {
      said_ += (said_.empty() ? "" : ";") + line.substr(0, line.size() - 1);
      ++kept_;
    }
    if (launch::IsLastWords(std::string_view(line).substr(0, line.size() - 1))) last_ = line.substr(0, line.size() - 1);
  }
  int fd_;
  std::string said_, last_;
  int kept_ = 0;
  std::thread thread_;
};

// Starts srun with `argv`, its stderr into a pipe; returns its pid (-1 and errno on failure).
pid_t StartSrun(const std::vector<std::string>& argv, int* err_fd) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(p[0]), ::close(p[1]);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    ::dup2(p[1], 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "baton run: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(p[1]);
  *err_fd = p[0];
  return pid;
}

// Sets the job's comment (squeue %k, sacct's Comment): where a user looks
// first for why a job ended. Through scontrol, as an administrator would;
// a failure is said, not fatal.
void SetJobComment(const std::string& job, const std::string& text, const Say& say) {
  const std::string arg = "comment=" + text.substr(0, 900);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("scontrol", "scontrol", "update", ("job=" + job).c_str(), arg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) say("could not set the job's comment (scontrol update)");
}

// The lost nodes as a cause: "node failure: n2 (left the allocation)".
std::string LostText(const std::vector<std::pair<std::string, std::string>>& lost) {
  std::string s;
  for (const auto& [host, why] : lost) s += (s.empty() ? "" : ", ") + host + " (" + why + ")";
  return s;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: baton run [--step-nodes N] [--min-nodes M] [--max-restarts R] [--ntasks-per-node T]\n"
      "                 [--mpi TYPE] [--srun-arg ARG]... [--] PROGRAM [ARGS...]\n"
      "Inside a job's allocation (a batch script): launches PROGRAM as the job's step with srun,\n"
      "and by how the step ended launches it again inside the allocation (a lost node, a killed\n"
      "rank, a deadline: on the nodes Slurm still lets run a step, at least --min-nodes), ends\n"
      "with the program's own status (a bug: no relaunch, no requeue), or exits 75 once to be\n"
      "requeued (an agreed stop, a preemption, the time limit, --max-restarts reached, too few\n"
      "nodes). Records every launch and step end in $BATON_CKPT_DIR/events. See baton-run(1).\n"
      "options");
  Options o;
  desc.add_options()("step-nodes", po::value(&o.step_nodes), "nodes a step runs on (default: every node of the job)")(
      "min-nodes", po::value(&o.min_nodes), "fewest nodes a step may go on with (default: --step-nodes)")(
      "max-restarts", po::value(&o.max_restarts)->default_value(3),
      "launches again inside this allocation, at most (0: every failure is a requeue)")(
      "ntasks-per-node", po::value(&o.per_node), "tasks per node (default: SLURM_NTASKS_PER_NODE, or 1)")(
      "mpi", po::value(&o.mpi)->default_value("pmix"), "srun --mpi=TYPE (none: srun's own default)")(
      "srun-arg", po::value(&o.srun_args), "one more argument for srun, before the program (repeatable)");
  std::vector<std::string> own;
  SplitProgram(args, &own, &o.program);
  if (own.size() == 1 && (own[0] == "--help" || own[0] == "-h")) {
    std::cout << desc;
    return 0;
  }
  po::variables_map vm;
  try {
    // No guessing: --step-node is no --step-nodes (strict options).
    po::store(po::command_line_parser(own)
                  .options(desc)
                  .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Usage(desc, e.what());
  }
  if (o.program.empty()) return Usage(desc, "no program to run (baton run [OPTIONS] [--] PROGRAM [ARGS...])");

  const auto env = ProcessEnvironment();
  auto get = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  long long job = 0;
  const std::string job_text = get("SLURM_JOB_ID");
  if (job_text.empty()) return Usage(desc, "SLURM_JOB_ID is not set: baton run runs inside a job's allocation (sbatch, salloc)");
  if (!launch::ParseDecimal(job_text, 1, 0xfffffffeLL, &job))
    return Usage(desc, "SLURM_JOB_ID=" + launch::Quoted(job_text) + " is not a job id");
  if (!vm.count("step-nodes")) {
    if (!launch::ParseDecimal(get("SLURM_JOB_NUM_NODES"), 1, launch::kMaxNodes, &o.step_nodes))
      return Usage(desc, "no --step-nodes and SLURM_JOB_NUM_NODES=" + launch::Quoted(get("SLURM_JOB_NUM_NODES")) +
                             " is not a node count");
  } else if (o.step_nodes < 1) {
    return Usage(desc, "--step-nodes " + std::to_string(o.step_nodes) + ": at least 1");
  }
  if (!vm.count("min-nodes")) o.min_nodes = o.step_nodes;
  if (o.min_nodes < 1) return Usage(desc, "--min-nodes " + std::to_string(o.min_nodes) + ": at least 1");
  if (o.min_nodes > o.step_nodes)
    return Usage(desc, "--min-nodes " + std::to_string(o.min_nodes) + " is more than --step-nodes " +
                           std::to_string(o.step_nodes) + " (a step cannot need more nodes than it runs on)");
  if (o.max_restarts < 0) return Usage(desc, "--max-restarts " + std::to_string(o.max_restarts) + ": 0 or more");
  if (!vm.count("ntasks-per-node")) {
    std::string per = get("SLURM_NTASKS_PER_NODE");
    per = per.substr(0, per.find('('));  // "2(x3)" -> 2
    if (per.empty() || !launch::ParseDecimal(per, 1, 1 << 20, &o.per_node)) o.per_node = 1;
  } else if (o.per_node < 1) {
    return Usage(desc, "--ntasks-per-node " + std::to_string(o.per_node) + ": at least 1");
  }
  if (o.mpi.empty()) return Usage(desc, "--mpi '': name a plugin (srun --mpi=list), or none");

  long long restart_count = 0;  // absent or malformed: a first run
  launch::ParseDecimal(get("SLURM_RESTART_COUNT"), 0, 1000000, &restart_count);
  const std::string restart = std::to_string(restart_count);
  const Say say(job_text, restart);
  const std::string dir = get("BATON_CKPT_DIR");
  say("start on " + get("SLURM_JOB_NODELIST") + " at time=" + Time() + ", checkpoints in " +
      (dir.empty() ? std::string("? (BATON_CKPT_DIR is not set: no event log)") : dir));

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns to say what came
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGUSR2, &sa, nullptr);

  std::unique_ptr<launch::SlurmQueries> slurm =
      launch::WithDeadline(launch::Libslurm(), kSlurmLimit, "the controller must answer for baton run");
  const std::string conf = get("SLURM_CONF");
  const Status conf_status = launch::SlurmConfPresent(conf, "run");
  const bool conf_missing = !conf_status.ok();

  std::string cause = restart == "0" ? "start" : "requeue (restart " + restart + ")";
  bool said_term = false, said_usr2 = false;
  for (int relaunches = 0;; ++relaunches) {
    // The nodes that can run the step now.
    launch::StepNodeRequest request;
    request.count = static_cast<size_t>(o.step_nodes);
    request.min = static_cast<size_t>(o.min_nodes);
    launch::Allocation allocation;
    std::vector<std::string> nodes, unusable;
    Status s = conf_missing ? conf_status : slurm->AllocationNodes(static_cast<uint32_t>(job), &allocation);
    if (s.ok()) s = launch::ChooseStepNodes(allocation, request, &nodes, &unusable);
    std::string list;
    if (s.ok()) s = slurm->CompressHostlist(nodes, &list);
    if (!s.ok()) {
      say("fewer than " + std::to_string(o.min_nodes) +
          " node(s) of the allocation can run a step, or Slurm did not answer (" + ErrorText(s) +
          "): exiting 75 to be requeued");
      return kRequeue;
    }
    if (g_term) {  // Slurm took the job away while the nodes were chosen
      say("SIGTERM before the launch: exiting 75 to be requeued");
      return kRequeue;
    }
    const long long tasks = static_cast<long long>(nodes.size()) * o.per_node;
    const RankRecords before = CountRankRecords(dir, job_text);
    if (!dir.empty()) {
      events::Record r("step_launch", NowSeconds());
      r.Str("job", job_text).Int("restart", restart_count).Int("launch", relaunches).Str("nodes", list)
          .Int("tasks", tasks).Str("cause", cause);
      if (Status w = AppendBatchRecord(dir, job_text, r.Line()); !w.ok())
        say("could not record the launch: " + ErrorText(w));
    }
    say("step launch " + std::to_string(relaunches) + " on " + list + " (" + std::to_string(nodes.size()) +
        " node(s), " + std::to_string(tasks) + " task(s)): " + cause + ", at time=" + Time());

    // -K: the first task that fails ends the step (its peers would otherwise
    // wait for it until their deadline).
    std::vector<std::string> argv = {"srun"};
    if (o.mpi != "none") argv.push_back("--mpi=" + o.mpi);
    for (const std::string& a : {std::string("-K"), std::string("-N"), std::to_string(nodes.size()),
                                 std::string("-n"), std::to_string(tasks),
                                 "--ntasks-per-node=" + std::to_string(o.per_node), std::string("-w"), list})
      argv.push_back(a);
    argv.insert(argv.end(), o.srun_args.begin(), o.srun_args.end());
    argv.insert(argv.end(), o.program.begin(), o.program.end());
    int err_fd = -1;
    const pid_t pid = StartSrun(argv, &err_fd);
    if (pid < 0) {
      say(std::string("cannot start srun: ") + std::strerror(errno) + ": exiting 75 to be requeued");
      return kRequeue;
    }
    SrunErrors errors(err_fd);
    g_srun = pid;
    if (g_usr2) ::kill(pid, SIGUSR2);  // came while the step was being launched
    int wstatus = 0;
    for (;;) {
      if (g_term && !said_term) said_term = true, say("SIGTERM: waiting for the step to save and stop");
      if (g_usr2 && !said_usr2) said_usr2 = true, say("USR2 (time limit near): forwarded to the step");
      const pid_t w = ::waitpid(pid, &wstatus, 0);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) {
        say(std::string("waitpid(srun): ") + std::strerror(errno) + ": exiting 75 to be requeued");
        return kRequeue;
      }
    }
    g_srun = 0;
    const int rc = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    const std::string said = errors.Said();

    // How the step ended, for baton report (as `baton step-end`).
    events::StepEnd end;
    end.job = job_text;
    end.restart = static_cast<int>(restart_count);
    end.exit = rc;
    end.nodes = list;
    end.said = said;
    launch::JobRecord state;
    bool job_ending = false;
    if (Status a = launch::AskLostNodes(*slurm, conf, "run", static_cast<uint32_t>(job), nodes, &end.lost); !a.ok())
      end.slurm_error = ErrorText(a);
    if (!dir.empty())
      if (Status w = AppendBatchRecord(dir, job_text, events::StepEndLine(end, NowSeconds())); !w.ok())
        say("could not record how the step ended: " + ErrorText(w));

    auto ending = [&]() {
      const RankRecords after = CountRankRecords(dir, job_text);
      launch::StepEnding e;
      e.exit = rc;
      e.nodes_lost = !end.lost.empty();
      e.uncaught = after.uncaught - before.uncaught;
      e.refused = after.refused - before.refused;
      e.stops = after.stops - before.stops;
      e.stop_asked = g_term || g_usr2;
      e.relaunches = relaunches;
      e.max_restarts = static_cast<int>(o.max_restarts);
      // Slurm's word: a job no longer RUNNING, or with a requeue on its way,
      // is being taken away whatever the step said.
      if (!conf_missing && slurm->JobState(static_cast<uint32_t>(job), &state).ok() && state.known)
        job_ending = (state.state & launch::kJobStateBase) != launch::kJobRunning ||
                     (state.state & (launch::kJobRequeueFlag | launch::kJobRequeueHoldFlag)) != 0;
      e.job_ending = job_ending;
      return e;
    };
    launch::StepEnding e = ending();
    launch::Verdict v = launch::DecideAfterStep(e);
    if (v.next == launch::Next::kRelaunch && launch::MayBeSlurmEndingTheJob(e)) {
      const auto until = std::chrono::steady_clock::now() + kSlurmSignalGrace;
      while (!g_term && !g_usr2 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      e = ending();
      v = launch::DecideAfterStep(e);
    }
    if (v.next != launch::Next::kRelaunch) {
      say(v.why + " at time=" + Time());
      if (v.next == launch::Next::kProgramStatus)
        SetJobComment(job_text,
                      "baton run: " + v.why + (errors.LastWords().empty() ? "" : "; last words: " + errors.LastWords()),
                      say);
      return v.exit;
    }
    say(v.why + " at time=" + Time());
    cause = e.nodes_lost ? "node failure: " + LostText(end.lost)
                         : "step ended with " + std::to_string(rc) + (said.empty() ? "" : ": " + said);
  }
}

}  // namespace baton::cli
