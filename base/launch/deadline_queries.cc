// WithDeadline (slurm_queries.h): each question to the controller on its
// own thread, waited for until a deadline.
#include <dlfcn.h>

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "base/launch/component.h"
#include "base/launch/slurm_queries.h"

namespace baton::launch {
namespace {

// A question past its deadline is left running on its detached thread, in
// this module's code. In the SPANK plugin the caller then returns to
// slurmstepd, which unloads the plugin (dlclose) and exits: the thread,
// when libslurm finally answers, returned into unmapped code and the job
// epilog died of SIGSEGV (seen in a fresh-clone check under load: "epilog
// failed status=0:11", and slurmd drains a node whose epilog fails). So the
// module that holds this code is marked never to be unloaded, once, before
// the first such thread starts (RTLD_NOLOAD: the loaded copy itself).
void KeepThisModuleLoaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&KeepThisModuleLoaded), &info) != 0 && info.dli_fname != nullptr) {
      (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // never closed: that is the point
    }
  });
}

class DeadlineQueries : public SlurmQueries {
 public:
  DeadlineQueries(SlurmQueries& inner, std::chrono::milliseconds limit, std::string context)
      : inner_(inner), limit_(limit), context_(std::move(context)) {}

  Status ExpandHostlist(const std::string& hostlist, size_t max_hosts, std::vector<std::string>* hosts) override {
    return inner_.ExpandHostlist(hostlist, max_hosts, hosts);  // local work, no controller
  }
  Status CompressHostlist(const std::vector<std::string>& hosts, std::string* hostlist) override {
    return inner_.CompressHostlist(hosts, hostlist);
  }
  Status StepTasks(const std::string& job_id, long step_id, std::vector<std::string>* nodes,
                   std::vector<std::vector<int>>* tids) override {
    using Layout = std::pair<std::vector<std::string>, std::vector<std::vector<int>>>;
    Layout layout;
    Status s = Ask("the step layout of " + job_id + "." + std::to_string(step_id) + " (slurm_job_step_layout_get)",
                   &layout, [job_id, step_id](SlurmQueries& q, Layout* out) {
                     return q.StepTasks(job_id, step_id, &out->first, &out->second);
                   });
    if (s.ok()) {
      *nodes = std::move(layout.first);
      *tids = std::move(layout.second);
    }
    return s;
  }
  Status NodeAddresses(const std::vector<std::string>& nodes, std::vector<std::string>* addrs) override {
    return Ask("the address of node " + (nodes.empty() ? std::string() : nodes[0]) +
                   (nodes.size() > 1 ? " and " + std::to_string(nodes.size() - 1) + " more" : "") + " (slurm_load_node)",
               addrs, [nodes](SlurmQueries& q, std::vector<std::string>* out) { return q.NodeAddresses(nodes, out); });
  }
  Status GpusPerNode(const std::string& job_id, std::optional<long> step_id, std::optional<int>* gpus) override {
    return Ask("the GPUs per node of job " + job_id + " (slurm_load_job)", gpus,
               [job_id, step_id](SlurmQueries& q, std::optional<int>* out) { return q.GpusPerNode(job_id, step_id, out); });
  }
  Status JobState(uint32_t job, JobRecord* record) override {
    return Ask("the state of job " + std::to_string(job) + " (slurm_load_job)", record,
               [job](SlurmQueries& q, JobRecord* out) { return q.JobState(job, out); });
  }
  Status UserJobs(uint32_t uid, std::map<uint32_t, uint32_t>* states) override {
    return Ask("the jobs of user " + std::to_string(uid) + " (slurm_load_job_user)", states,
               [uid](SlurmQueries& q, std::map<uint32_t, uint32_t>* out) { return q.UserJobs(uid, out); });
  }
  Status AllocationNodes(uint32_t job, Allocation* allocation) override {
    return Ask("the nodes of job " + std::to_string(job) + " and their states (slurm_load_job, slurm_load_node)",
               allocation, [job](SlurmQueries& q, Allocation* out) { return q.AllocationNodes(job, out); });
  }

 private:
  // One question: `call` asks `inner_` into an answer the question's thread
  // owns (it may outlive this wait), copied to `out` only when it came in time.
  template <typename Out, typename Call>
  Status Ask(const std::string& what, Out* out, Call call) {
    auto answer = std::make_shared<Out>();
    SlurmQueries& inner = inner_;
    Status s = Bounded(what, [&inner, answer, call] { return call(inner, answer.get()); });
    if (s.ok()) *out = std::move(*answer);
    return s;
  }

  // Runs `call` on a thread that owns everything it touches (captured by
  // value or shared), so that it may outlive this wait.
  template <typename Fn>
  Status Bounded(const std::string& what, Fn call) {
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Status result;
    };
    auto shared = std::make_shared<Shared>();
    KeepThisModuleLoaded();
    std::thread([shared, call]() mutable {
      Status s = call();
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->result = s;
      shared->done = true;
      shared->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(shared->mu);
    if (!shared->cv.wait_for(lock, limit_, [&] { return shared->done; })) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(limit_.count()) / 1000.0);
      return Status::Timeout(kComponent, std::string("Slurm did not answer within ") + seconds + " s when asked for " +
                                             what + ": " + context_);
    }
    if (!shared->result.ok()) return shared->result.Annotate("asking Slurm for " + what + " (" + context_ + ")");
    return shared->result;
  }

  SlurmQueries& inner_;
  std::chrono::milliseconds limit_;
  std::string context_;
};

}  // namespace

std::unique_ptr<SlurmQueries> WithDeadline(SlurmQueries& inner, std::chrono::milliseconds limit, std::string context) {
  return std::make_unique<DeadlineQueries>(inner, limit, std::move(context));
}

}  // namespace baton::launch
