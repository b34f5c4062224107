#include "base/launch/launch_env.h"

#include "base/launch/component.h"

namespace baton::launch {
namespace {

// The name each node goes by in a hostfile of `format`. Open MPI's mpirun
// and MPICH's Hydra, inside an allocation, start their daemons with `srun
// --nodelist=<the file's hosts>`, and mpirun checks the file against the
// allocation's node names: they need node names, and an address is refused
// ("node not present in the allocation"). DeepSpeed (pdsh) and Horovod ssh
// to what the file says: they get the address Slurm reaches the node by,
// as does plain, a list for scripts. Horovod reads "host slots=N" into
// "host:N" and splits that at ':', so an IPv6 address cannot be said to it:
// there the node name stands (it must resolve where horovodrun runs).
const std::string& HostOf(HostfileFormat format, const StepInfo& info, int node) {
  const std::string& name = info.layout.nodes[static_cast<size_t>(node)];
  if (info.hosts.empty() || format == HostfileFormat::kOpenMpi || format == HostfileFormat::kMpich) return name;
  const std::string& addr = info.hosts[static_cast<size_t>(node)];
  if (format == HostfileFormat::kHorovod && addr.find(':') != std::string::npos) return name;
  return addr;
}

// BATON_DEVICE: the index, among the devices this task sees, of the GPU it
// should use. LOCAL_RANK keeps torchrun's meaning (the position on the
// node) whatever the binding, so set_device(LOCAL_RANK) is right only
// without binding; set_device(BATON_DEVICE) is right always.
//
// The task sees fewer GPUs than the step has on the node when Slurm bound
// them per task (--gpus-per-task, --gpu-bind=single/map_gpu/...), or when
// baton's local-rank did (`baton env` inside such a task): the task's own
// GPUs are then Slurm's choice, and the first of them is its device. Else
// every task sees the step's GPUs: local rank i gets the i-th.
Status BindGpu(const StepInfo& info, GpuBind bind, int local_rank, int local_size, EnvList* env) {
  auto set = [env](const char* k, const std::string& v) { env->emplace_back(k, v); };
  const std::string& node = info.layout.nodes[static_cast<size_t>(*info.node_index)];
  const size_t seen = info.node_gpus.size();
  const bool bound_per_task = info.gpus_on_node && seen < static_cast<size_t>(*info.gpus_on_node);
  if (seen == 0) {
    if (bind != GpuBind::kLocalRank) return Status::OK();
    return Status::Unavailable(kComponent, "--baton-gpu-bind=local-rank: Slurm gave this step no GPUs on " + node +
                                               " (ask with --gpus, --gres or --gpus-per-task)");
  }
  if (bound_per_task) {
    if (bind == GpuBind::kLocalRank) set("CUDA_VISIBLE_DEVICES", info.node_gpus.front());
    set("BATON_DEVICE", "0");
    return Status::OK();
  }
  if (seen < static_cast<size_t>(local_size)) {
    // Tasks would share GPUs: with local-rank, a silent oversubscription
    // the user did not ask for; without, no device is the task's own.
    if (bind != GpuBind::kLocalRank) return Status::OK();
    return Status::Unavailable(kComponent, "--baton-gpu-bind=local-rank: " + std::to_string(local_size) +
                                               " tasks on " + node + " but Slurm gave the step " +
                                               std::to_string(seen) + " GPUs there");
  }
  if (bind == GpuBind::kLocalRank) {
    set("CUDA_VISIBLE_DEVICES", info.node_gpus[static_cast<size_t>(local_rank)]);
    set("BATON_DEVICE", "0");
  } else {
    set("BATON_DEVICE", std::to_string(local_rank));
  }
  return Status::OK();
}

}  // namespace

int MasterPort(const std::string& job_id, std::optional<long> step_id, int lo, int hi) {
  // FNV-1a over the job id spreads jobs over the range; the step's slot is
  // added so that the steps of one job get consecutive, distinct ports.
  uint64_t h = 1469598103934665603ull;
  for (char c : job_id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  const uint64_t slot = step_id ? static_cast<uint64_t>(*step_id) + 1 : 0;  // batch script: 0
  return lo + static_cast<int>((h + slot) % span);
}

int MasterPortFor(const StepInfo& info, const LaunchOptions& opts, const PluginConfig& config) {
  if (opts.master_port) return *opts.master_port;
  if (!info.resv_ports.empty()) return info.resv_ports.front();
  return MasterPort(info.job_id, info.step_id, config.port_lo, config.port_hi);
}

std::string FormatHostfile(HostfileFormat format, const StepInfo& info) {
  const StepLayout& layout = info.layout;
  const std::vector<int> counts = layout.TasksPerNode();
  std::string out;
  switch (format) {
    case HostfileFormat::kOpenMpi:
    case HostfileFormat::kHorovod:
      for (int n = 0; n < layout.num_nodes(); ++n)
        if (counts[n] > 0) out += HostOf(format, info, n) + " slots=" + std::to_string(counts[n]) + "\n";
      break;
    case HostfileFormat::kDeepSpeed:
      // DeepSpeed's launcher starts one process per slot and gives each a
      // GPU: slots are GPUs when Slurm says how many each node has.
      for (int n = 0; n < layout.num_nodes(); ++n) {
        if (counts[n] == 0) continue;
        const int slots = info.gpus_per_node.value_or(counts[n]);
        out += HostOf(format, info, n) + " slots=" + std::to_string(slots) + "\n";
      }
      break;
    case HostfileFormat::kMpich:
      for (int n = 0; n < layout.num_nodes(); ++n)
        if (counts[n] > 0) out += HostOf(format, info, n) + ":" + std::to_string(counts[n]) + "\n";
      break;
    case HostfileFormat::kPlain:
      for (int node : layout.task_node) out += HostOf(format, info, node) + "\n";
      break;
  }
  return out;
}

std::string ExpandHostfileDir(const std::string& tmpl, const std::string& user,
                              const std::string& job, const std::string& step,
                              const std::string& node, const std::string& tmpdir) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '%' || i + 1 == tmpl.size()) {
      out += tmpl[i];
      continue;
    }
    switch (tmpl[++i]) {
      case 'u': out += user; break;
      case 'j': out += job; break;
      case 's': out += step; break;
      case 'n': out += node; break;
      case 't': out += tmpdir; break;
      default: out += tmpl[i]; break;  // "%%" -> "%"; others were rejected by the config parser
    }
  }
  return out;
}

std::vector<std::string> SplitDeviceList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> TaskGpus(const std::optional<std::string>& cuda_visible_devices,
                                  std::optional<int> gpus_on_node) {
  if (cuda_visible_devices) return SplitDeviceList(*cuda_visible_devices);
  std::vector<std::string> out;
  for (int i = 0; i < gpus_on_node.value_or(0); ++i) out.push_back(std::to_string(i));
  return out;
}

Status DeriveLaunchEnv(const StepInfo& info, const LaunchOptions& opts, const PluginConfig& config,
                       EnvList* env) {
  const StepLayout& layout = info.layout;
  if (layout.num_nodes() == 0)
    return Status::InvalidArgument(kComponent, "job " + info.job_id + ": the step has no nodes");
  if (info.node_index && (*info.node_index < 0 || *info.node_index >= layout.num_nodes())) {
    return Status::InvalidArgument(kComponent, "node index " + std::to_string(*info.node_index) +
                                                   " is outside the step's " +
                                                   std::to_string(layout.num_nodes()) + " nodes");
  }
  if (info.master_addr.empty()) {
    return Status::InvalidArgument(kComponent, "no address known for rank 0's node " +
                                                   layout.nodes[static_cast<size_t>(layout.MasterNode())]);
  }

  env->clear();
  auto set = [env](const std::string& k, const std::string& v) { env->emplace_back(k, v); };
  set("MASTER_ADDR", info.master_addr);
  set("MASTER_PORT", std::to_string(MasterPortFor(info, opts, config)));

  if (info.rank) {
    const int rank = *info.rank;
    if (!info.node_index)
      return Status::InvalidArgument(kComponent, "rank " + std::to_string(rank) + " runs on no node of the step");
    const int node = *info.node_index;
    if (rank < 0 || rank >= layout.num_tasks()) {
      return Status::InvalidArgument(kComponent, "rank " + std::to_string(rank) + " is outside the step's " +
                                                     std::to_string(layout.num_tasks()) + " tasks");
    }
    if (layout.task_node[rank] != node) {
      return Status::InvalidArgument(kComponent, "rank " + std::to_string(rank) + " runs on node " +
                                                     layout.nodes[node] + " but the task map places it on " +
                                                     layout.nodes[layout.task_node[rank]]);
    }
    const int local_size = layout.TasksPerNode()[static_cast<size_t>(node)];
    int local_rank = 0;
    if (info.local_rank) {
      local_rank = *info.local_rank;
    } else {
      for (int r = 0; r < rank; ++r) local_rank += layout.task_node[r] == node;
    }
    if (local_rank < 0 || local_rank >= local_size) {
      return Status::InvalidArgument(kComponent, "local rank " + std::to_string(local_rank) + " of rank " +
                                                     std::to_string(rank) + " is outside the " +
                                                     std::to_string(local_size) + " tasks on " + layout.nodes[node]);
    }
    set("RANK", std::to_string(rank));
    set("WORLD_SIZE", std::to_string(layout.num_tasks()));
    set("LOCAL_RANK", std::to_string(local_rank));
    set("LOCAL_WORLD_SIZE", std::to_string(local_size));
    set("NODE_RANK", std::to_string(node));
    // torchrun's names: one agent group per node.
    set("GROUP_RANK", std::to_string(node));
    set("GROUP_WORLD_SIZE", std::to_string(layout.num_nodes()));

    BATON_RETURN_IF_ERROR(BindGpu(info, opts.gpu_bind.value_or(config.gpu_bind), local_rank, local_size, env));
  }
  if (!info.hostfile_path.empty()) set("BATON_HOSTFILE", info.hostfile_path);
  set("BATON_JOB_ID", info.job_id);
  set("BATON_NNODES", std::to_string(layout.num_nodes()));
  set("BATON_RESTART_COUNT", std::to_string(info.restart_count));
  if (opts.ckpt_dir) set("BATON_CKPT_DIR", *opts.ckpt_dir);
  if (opts.local_dir) set("BATON_LOCAL_DIR", *opts.local_dir);
  return Status::OK();
}

}  // namespace baton::launch
