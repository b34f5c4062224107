// SlurmQueries answered by libslurm. Compiled into the SPANK plugin without
// linking libslurm: srun, sbatch and slurmstepd already carry Slurm's
// library, and a second copy in the same process would have its own,
// unconfigured state.
#include "base/launch/slurm_queries.h"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cstdlib>
#include <map>

#include "base/launch/component.h"
#include "base/launch/decimal.h"
#include "base/launch/hostlist_bound.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_facts.h"

namespace baton::launch {
namespace {

// slurm_facts.cc knows Slurm's special step ids without Slurm's headers.
static_assert(SLURM_MAX_NORMAL_STEP_ID == 0xfffffff0u && SLURM_BATCH_SCRIPT == 0xfffffffbu &&
                  SLURM_INTERACTIVE_STEP == 0xfffffffau && SLURM_EXTERN_CONT == 0xfffffffcu &&
                  SLURM_PENDING_STEP == 0xfffffffdu,
              "Slurm's special step ids moved");
// sweep_decision.h reads job states without Slurm's header.
static_assert(JOB_STATE_BASE == kJobStateBase && JOB_PENDING == kJobPending && JOB_RUNNING == kJobRunning &&
                  JOB_SUSPENDED == kJobSuspended && JOB_COMPLETE == kJobComplete && JOB_CANCELLED == kJobCancelled &&
                  JOB_FAILED == kJobFailed && JOB_TIMEOUT == kJobTimeout && JOB_NODE_FAIL == kJobNodeFail &&
                  JOB_PREEMPTED == kJobPreempted && JOB_BOOT_FAIL == kJobBootFail && JOB_DEADLINE == kJobDeadline &&
                  JOB_OOM == kJobOom && JOB_END == kJobEnd && JOB_REQUEUE == kJobRequeueFlag &&
                  JOB_REQUEUE_HOLD == kJobRequeueHoldFlag && JOB_SPECIAL_EXIT == kJobSpecialExitFlag &&
                  JOB_RESIZING == kJobResizingFlag && JOB_RECONFIG_FAIL == kJobReconfigFailFlag &&
                  JOB_REQUEUE_FED == kJobRequeueFedFlag,
              "Slurm's job states moved");

// allocation_nodes.h reads node states without Slurm's header.
static_assert(NODE_STATE_BASE == kNodeStateBase && NODE_STATE_UNKNOWN == kNodeUnknown && NODE_STATE_DOWN == kNodeDown &&
                  NODE_STATE_IDLE == kNodeIdle && NODE_STATE_ALLOCATED == kNodeAllocated &&
                  NODE_STATE_ERROR == kNodeError && NODE_STATE_MIXED == kNodeMixed && NODE_STATE_FUTURE == kNodeFuture &&
                  NODE_STATE_DRAIN == kNodeDrainFlag && NODE_STATE_NO_RESPOND == kNodeNoRespondFlag &&
                  NODE_STATE_POWERED_DOWN == kNodePoweredDownFlag && NODE_STATE_FAIL == kNodeFailFlag &&
                  NODE_STATE_MAINT == kNodeMaintFlag && NODE_STATE_REBOOT_ISSUED == kNodeRebootIssuedFlag &&
                  NODE_STATE_POWER_DOWN == kNodePowerDownFlag,
              "Slurm's node states moved");

std::string SlurmError(const char* call) {
  const int err = slurm_get_errno();
  return std::string(call) + " failed: " + slurm_strerror(err) + " (errno " + std::to_string(err) + ")";
}

class LibslurmQueries : public SlurmQueries {
 public:
  Status ExpandHostlist(const std::string& hostlist, size_t max_hosts, std::vector<std::string>* hosts) override {
    hosts->clear();
    // libslurm builds every host while it parses; a list of more than the
    // caller can hold is refused before it is handed over.
    BATON_RETURN_IF_ERROR(CheckHostlistBound(hostlist, max_hosts));
    hostlist_t hl = slurm_hostlist_create(hostlist.c_str());
    if (hl == nullptr) return Status::InvalidArgument(kComponent, "host list " + Quoted(hostlist) + " is malformed");
    // Counted from the ranges, before a single host is made.
    const int count = slurm_hostlist_count(hl);
    Status s;
    if (count <= 0) {
      s = Status::InvalidArgument(kComponent, "host list " + Quoted(hostlist) + " names no host");
    } else if (static_cast<size_t>(count) > max_hosts) {
      s = Status::InvalidArgument(kComponent, "host list " + Quoted(hostlist) + " names " + std::to_string(count) +
                                                  " hosts, more than the " + std::to_string(max_hosts) +
                                                  " it can hold");
    } else {
      hosts->reserve(static_cast<size_t>(count));
      while (char* host = slurm_hostlist_shift(hl)) {
        hosts->emplace_back(host);
        free(host);
      }
    }
    slurm_hostlist_destroy(hl);
    return s;
  }

  Status CompressHostlist(const std::vector<std::string>& hosts, std::string* hostlist) override {
    hostlist_t hl = slurm_hostlist_create("");
    if (hl == nullptr) return Status::Internal(kComponent, "slurm_hostlist_create(\"\") failed");
    Status s;
    for (const std::string& h : hosts) {
      if (slurm_hostlist_push_host(hl, h.c_str()) != 1) {
        s = Status::InvalidArgument(kComponent, "cannot add " + Quoted(h) + " to a host list");
        break;
      }
    }
    if (s.ok()) {
      char* text = slurm_hostlist_ranged_string_malloc(hl);
      if (text == nullptr) s = Status::Internal(kComponent, "slurm_hostlist_ranged_string_malloc failed");
      else *hostlist = text;
      free(text);
    }
    slurm_hostlist_destroy(hl);
    if (!s.ok()) return s;
    // The list is only worth handing over if it expands to the same hosts.
    // libslurm reads a name's trailing digits as an unsigned long: a name
    // whose digits pass 2^64 ("node" + 26 digits) comes back as
    // "node00000018446744073709551615" (found by fuzz_layout). Refused,
    // naming the first host that does not survive, rather than handing
    // every task the wrong addresses.
    // (More hosts than given is an error of ExpandHostlist's bound; fewer
    // is caught by the loop.)
    std::vector<std::string> back;
    s = ExpandHostlist(*hostlist, hosts.size(), &back);
    for (size_t i = 0; s.ok() && i < hosts.size(); ++i) {
      if (i >= back.size() || back[i] != hosts[i])
        s = Status::InvalidArgument(kComponent, "host " + Quoted(hosts[i]) +
                                                    " does not survive a Slurm host list (it comes back as " +
                                                    (i < back.size() ? Quoted(back[i]) : std::string("nothing")) +
                                                    "; a number in a name past 2^64?)");
    }
    if (!s.ok()) hostlist->clear();
    return s;
  }

  Status StepTasks(const std::string& job_id, long step_id, std::vector<std::string>* nodes,
                   std::vector<std::vector<int>>* tids) override {
    long long job = 0;
    if (!ParseDecimal(job_id, 1, 0xffffffffLL, &job))
      return Status::InvalidArgument(kComponent, "job id " + Quoted(job_id) + " is not a number");
    slurm_step_id_t id = {};
    id.job_id = static_cast<uint32_t>(job);
    id.step_id = static_cast<uint32_t>(step_id);
    id.step_het_comp = NO_VAL;
    slurm_step_layout_t* layout = slurm_job_step_layout_get(&id);
    if (layout == nullptr) {
      const std::string what = SlurmError("slurm_job_step_layout_get") + " for step " + job_id + "." +
                               std::to_string(step_id);
      // The controller's answer for a job or step it does not hold
      // (proc_req.c, _slurm_rpc_step_layout); anything else is a failure
      // to ask.
      if (slurm_get_errno() == ESLURM_INVALID_JOB_ID) return Status::NotFound(kComponent, what);
      return Status::Unavailable(kComponent, what);
    }
    Status s = ExpandHostlist(layout->node_list ? layout->node_list : "", layout->node_cnt, nodes);
    if (s.ok() && nodes->size() != layout->node_cnt) {
      s = Status::Internal(kComponent, "step layout lists " + std::to_string(nodes->size()) +
                                           " nodes but counts " + std::to_string(layout->node_cnt));
    }
    if (s.ok()) {
      tids->assign(layout->node_cnt, {});
      for (uint32_t n = 0; n < layout->node_cnt; ++n)
        (*tids)[n].assign(layout->tids[n], layout->tids[n] + layout->tasks[n]);
    }
    slurm_job_step_layout_free(layout);
    return s;
  }

  Status NodeAddresses(const std::vector<std::string>& nodes, std::vector<std::string>* addrs) override {
    addrs->clear();
    node_info_msg_t* msg = nullptr;
    // One node: ask for it alone; more: one query for the whole table.
    const int rc = nodes.size() == 1 ? slurm_load_node_single(&msg, const_cast<char*>(nodes[0].c_str()), SHOW_ALL)
                                     : slurm_load_node(0, &msg, SHOW_ALL);
    if (rc != SLURM_SUCCESS && slurm_get_errno() == ESLURM_ACCESS_DENIED) {
      // PrivateData=nodes: the controller shows node records to operators
      // alone. A user's job then reaches its nodes by their names (which
      // must resolve on the nodes, as Slurm's default NodeAddr is the name).
      *addrs = nodes;
      return Status::OK();
    }
    if (rc != SLURM_SUCCESS || msg == nullptr) {
      return Status::Unavailable(kComponent, SlurmError(nodes.size() == 1 ? "slurm_load_node_single" : "slurm_load_node") +
                                                 " for node " + (nodes.empty() ? std::string("(none)") : nodes[0]) +
                                                 (nodes.size() > 1 ? " and " + std::to_string(nodes.size() - 1) + " more" : ""));
    }
    std::map<std::string, std::string> addr_of;
    for (uint32_t i = 0; i < msg->record_count; ++i) {
      const node_info_t& n = msg->node_array[i];
      if (n.name != nullptr && n.node_addr != nullptr) addr_of[n.name] = n.node_addr;
    }
    slurm_free_node_info_msg(msg);
    for (const std::string& node : nodes) {
      auto it = addr_of.find(node);
      if (it == addr_of.end()) return Status::NotFound(kComponent, "Slurm has no address for node " + Quoted(node));
      addrs->push_back(it->second);
    }
    return Status::OK();
  }

  Status GpusPerNode(const std::string& job_id, std::optional<long> step_id, std::optional<int>* gpus) override {
    gpus->reset();
    long long job = 0;
    if (!ParseDecimal(job_id, 1, 0xffffffffLL, &job))
      return Status::InvalidArgument(kComponent, "job id " + Quoted(job_id) + " is not a number");
    if (step_id) {
      job_step_info_response_msg_t* steps = nullptr;
      if (slurm_get_job_steps(0, static_cast<uint32_t>(job), static_cast<uint32_t>(*step_id), &steps, SHOW_ALL) !=
              SLURM_SUCCESS ||
          steps == nullptr) {
        return Status::Unavailable(kComponent, SlurmError("slurm_get_job_steps") + " for step " + job_id + "." +
                                                   std::to_string(*step_id));
      }
      const std::string tres = steps->job_step_count > 0 && steps->job_steps[0].tres_per_node
                                   ? steps->job_steps[0].tres_per_node
                                   : "";
      slurm_free_job_step_info_response_msg(steps);
      BATON_RETURN_IF_ERROR(ParseGpuCount("the step's TresPerNode", tres, true, gpus));
      // A step that asked for no GPU has all of the job's (srun --gres).
      if (*gpus || !tres.empty()) return Status::OK();
    }
    job_info_msg_t* jobs = nullptr;
    if (slurm_load_job(&jobs, static_cast<uint32_t>(job), SHOW_ALL) != SLURM_SUCCESS || jobs == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_load_job") + " for job " + job_id);
    const std::string tres = jobs->record_count > 0 && jobs->job_array[0].tres_per_node ? jobs->job_array[0].tres_per_node : "";
    slurm_free_job_info_msg(jobs);
    return ParseGpuCount("the job's TresPerNode", tres, true, gpus);
  }

  Status JobState(uint32_t job, JobRecord* record) override {
    *record = JobRecord();
    job_info_msg_t* jobs = nullptr;
    if (slurm_load_job(&jobs, job, SHOW_ALL) != SLURM_SUCCESS || jobs == nullptr) {
      if (slurm_get_errno() == ESLURM_INVALID_JOB_ID) return Status::OK();  // unknown: ended long enough ago
      return Status::Unavailable(kComponent, SlurmError("slurm_load_job") + " for job " + std::to_string(job));
    }
    Status s;
    if (jobs->record_count == 0) s = Status::OK();  // answered, but not with it: unknown
    else {
      record->known = true;
      record->state = jobs->job_array[0].job_state;
    }
    slurm_free_job_info_msg(jobs);
    return s;
  }

  Status UserJobs(uint32_t uid, std::map<uint32_t, uint32_t>* states) override {
    states->clear();
    job_info_msg_t* jobs = nullptr;
    if (slurm_load_job_user(&jobs, uid, SHOW_ALL) != SLURM_SUCCESS || jobs == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_load_job_user") + " for user " + std::to_string(uid));
    for (uint32_t i = 0; i < jobs->record_count; ++i) (*states)[jobs->job_array[i].job_id] = jobs->job_array[i].job_state;
    slurm_free_job_info_msg(jobs);
    return Status::OK();
  }

  Status AllocationNodes(uint32_t job, Allocation* allocation) override {
    *allocation = Allocation();
    allocation->job = job;
    job_info_msg_t* jobs = nullptr;
    if (slurm_load_job(&jobs, job, SHOW_ALL) != SLURM_SUCCESS || jobs == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_load_job") + " for job " + std::to_string(job));
    std::string list;
    uint32_t state = 0;
    const bool found = jobs->record_count > 0;
    if (found) {
      list = jobs->job_array[0].nodes ? jobs->job_array[0].nodes : "";
      state = jobs->job_array[0].job_state;
    }
    slurm_free_job_info_msg(jobs);
    if (!found) return Status::NotFound(kComponent, "the controller does not know job " + std::to_string(job));
    if (list.empty() || (state & JOB_STATE_BASE) != JOB_RUNNING)
      return Status::Unavailable(kComponent, "job " + std::to_string(job) + " is not running (job_state " +
                                                 std::to_string(state) + "): it holds no nodes to run a step on");
    std::vector<std::string> names;
    BATON_RETURN_IF_ERROR(ExpandHostlist(list, kMaxNodes, &names));
    node_info_msg_t* msg = nullptr;
    if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS || msg == nullptr)
      return Status::Unavailable(kComponent, SlurmError("slurm_load_node") + " for the nodes of job " +
                                                 std::to_string(job) + " (" + list + ")");
    std::map<std::string, const node_info_t*> by_name;
    for (uint32_t i = 0; i < msg->record_count; ++i)
      if (msg->node_array[i].name != nullptr) by_name[msg->node_array[i].name] = &msg->node_array[i];
    Status s;
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        s = Status::NotFound(kComponent, "job " + std::to_string(job) + " holds node " + Quoted(name) +
                                             ", which slurm_load_node does not list");
        break;
      }
      NodeHealth n;
      n.name = name;
      n.state = it->second->node_state;
      if (it->second->reason != nullptr) n.reason = it->second->reason;
      allocation->nodes.push_back(std::move(n));
    }
    slurm_free_node_info_msg(msg);
    return s;
  }
};

}  // namespace

SlurmQueries& Libslurm() {
  static LibslurmQueries queries;
  return queries;
}

}  // namespace baton::launch
