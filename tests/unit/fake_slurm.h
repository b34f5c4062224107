// SlurmQueries for unit tests: host lists through libslurm's own hostlist
// functions (no cluster needed for those), the step layout and the node
// addresses as the test sets them, every question to the controller
// counted, and a switch that makes those questions hang as an unreachable
// controller does.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/launch/slurm_queries.h"

namespace baton::launch {

class FakeSlurm : public SlurmQueries {
 public:
  std::vector<std::string> nodes = {"n1", "n2"};
  std::vector<std::vector<int>> tids = {{0, 2}, {1, 3}};
  std::map<std::string, std::string> addr;  // unset: "addr-of-<node>"
  std::optional<int> gpus_per_node;
  int layout_calls = 0, address_calls = 0, gpu_calls = 0;

  Status ExpandHostlist(const std::string& h, size_t max_hosts, std::vector<std::string>* hosts) override {
    return Libslurm().ExpandHostlist(h, max_hosts, hosts);
  }
  Status CompressHostlist(const std::vector<std::string>& hosts, std::string* list) override {
    return Libslurm().CompressHostlist(hosts, list);
  }
  Status StepTasks(const std::string&, long, std::vector<std::string>* n, std::vector<std::vector<int>>* t) override {
    Hang();
    ++layout_calls;
    *n = nodes;
    *t = tids;
    return Status::OK();
  }
  Status NodeAddresses(const std::vector<std::string>& of, std::vector<std::string>* addrs) override {
    Hang();
    ++address_calls;
    addrs->clear();
    for (const std::string& node : of) {
      auto it = addr.find(node);
      addrs->push_back(it == addr.end() ? "addr-of-" + node : it->second);
    }
    return Status::OK();
  }

  Status GpusPerNode(const std::string&, std::optional<long>, std::optional<int>* gpus) override {
    Hang();
    ++gpu_calls;
    *gpus = gpus_per_node;
    return Status::OK();
  }

  // JobState: the jobs the controller knows, and jobs whose question fails.
  std::map<uint32_t, uint32_t> job_states;
  std::vector<uint32_t> failing_jobs;
  int job_calls = 0;
  Status JobState(uint32_t job, JobRecord* record) override {
    Hang();
    ++job_calls;
    *record = JobRecord();
    for (uint32_t f : failing_jobs)
      if (f == job) return Status::Unavailable("spank", "slurm_load_job failed for job " + std::to_string(job));
    auto it = job_states.find(job);
    if (it != job_states.end()) {
      record->known = true;
      record->state = it->second;
    }
    return Status::OK();
  }

  // UserJobs: job_states, every job the test set (whatever the user).
  int user_jobs_calls = 0;
  Status UserJobs(uint32_t, std::map<uint32_t, uint32_t>* states) override {
    Hang();
    ++user_jobs_calls;
    *states = job_states;
    return Status::OK();
  }

  // AllocationNodes: the allocation the test sets, or its failure.
  Allocation allocation;
  std::optional<Status> allocation_failure;
  int allocation_calls = 0;
  Status AllocationNodes(uint32_t job, Allocation* out) override {
    Hang();
    ++allocation_calls;
    if (allocation_failure) return *allocation_failure;
    *out = allocation;
    out->job = job;
    return Status::OK();
  }

  // Questions to the controller block until Release().
  void HangQuestions() {
    std::lock_guard<std::mutex> lock(mu_);
    hang_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    hang_ = false;
    cv_.notify_all();
  }

 private:
  void Hang() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !hang_; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool hang_ = false;
};

}  // namespace baton::launch
