// libFuzzer target: the step layout as Slurm hands it over in the
// environment (base/launch/step_layout.h, slurm_queries.h): a node list
// (SLURM_JOB_NODELIST, expanded by libslurm's hostlist with baton's bound
// on the number of hosts), tasks-per-node counts ("2(x3),1"), the task map
// baton hands over ("0*2,1*2") and a distribution name. Fields are
// separated by '|'. Any bytes give OK or InvalidArgument; never a crash, a
// hang, or an expansion past the bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/launch/quote.h"
#include "base/launch/slurm_queries.h"
#include "base/launch/step_layout.h"
#include "tests/fuzz/fuzz_input.h"

using namespace baton::launch;

namespace {
// As the plugin bounds a step: no more hosts or tasks than this.
constexpr size_t kFuzzMaxHosts = 4096;
constexpr size_t kFuzzMaxTasks = 1 << 16;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> f = baton::fuzz::Fields(data, size, '|', 4);
  f.resize(4);
  // libslurm's hostlist keeps a 64 KiB-ish line limit of its own; baton
  // hands it what Slurm set, so any length is fair.
  std::vector<std::string> hosts;
  baton::Status s = Libslurm().ExpandHostlist(f[0], kFuzzMaxHosts, &hosts);
  if (s.ok() && (hosts.empty() || hosts.size() > kFuzzMaxHosts)) std::abort();
  // libslurm reads some malformed lists as one "host" that keeps the
  // list's syntax ("gpu-[1-2]-[01x6)" gives "gpu-[1-2]-]"), and any blank
  // or control character as a separator; baton's callers refuse such a list
  // or name (slurm_facts.cc: HasControlOrBlank on the list, CheckHost on
  // each name), so only lists they accept must survive compressing and
  // expanding again. (A form feed passed the hand-written filter this had
  // before: "gpu-,\f2,1,0" expanded to a host "\f2" that came back as "2".)
  bool names = s.ok() && !HasControlOrBlank(f[0]);
  for (const std::string& h : hosts)
    if (h.empty() || HasControlOrBlank(h) || h.find_first_of("#,[]=()") != std::string::npos) names = false;
  if (names) {
    std::string again;
    if (Libslurm().CompressHostlist(hosts, &again).ok()) {
      std::vector<std::string> back;
      if (!Libslurm().ExpandHostlist(again, kFuzzMaxHosts, &back).ok() || back != hosts) std::abort();
    }
  }

  std::vector<int> counts;
  s = ParseTasksPerNode(f[1], &counts);
  if (s.ok()) {
    size_t tasks = 0;
    for (int c : counts) {
      if (c < 0) std::abort();  // 0 is accepted: a count, not a node list
      tasks += static_cast<size_t>(c);
    }
    if (hosts.empty()) hosts.assign(counts.size(), "n");
    if (counts.size() == hosts.size() && tasks <= kFuzzMaxTasks) {
      StepLayout layout;
      if (LayoutFromCounts(hosts, counts, &layout).ok() && layout.num_tasks() != static_cast<int>(tasks)) std::abort();
      if (LayoutFromDistribution(hosts, counts, f[3], &layout).ok()) {
        if (layout.TasksPerNode() != counts) std::abort();
        const std::string map = EncodeTaskMap(layout.task_node);
        std::vector<int> back;
        if (!DecodeTaskMap(map, layout.num_nodes(), &back).ok() || back != layout.task_node) std::abort();
        (void)DistributionOf(layout);
      }
    }
  }

  std::vector<int> task_node;
  const int nodes = hosts.empty() ? 1 : static_cast<int>(hosts.size());
  if (DecodeTaskMap(f[2], nodes, &task_node).ok()) {
    for (int n : task_node)
      if (n < 0 || n >= nodes) std::abort();
  }
  return 0;
}
