#include "base/launch/allocation_nodes.h"

#include "base/launch/component.h"

namespace baton::launch {

std::string Unusable(const NodeHealth& node) {
  std::string why;
  auto add = [&why](const char* w) { why += std::string(why.empty() ? "" : "+") + w; };
  switch (node.state & kNodeStateBase) {
    case kNodeDown: add("DOWN"); break;
    case kNodeUnknown: add("UNKNOWN"); break;
    case kNodeError: add("ERROR"); break;
    case kNodeFuture: add("FUTURE"); break;
    default: break;  // idle, allocated, mixed: usable unless a flag says otherwise
  }
  if (node.state & kNodeDrainFlag) add("DRAIN");
  if (node.state & kNodeFailFlag) add("FAIL");
  if (node.state & kNodeNoRespondFlag) add("NOT_RESPONDING");
  if (node.state & (kNodePoweredDownFlag | kNodePowerDownFlag)) add("POWERED_DOWN");
  if (node.state & kNodeMaintFlag) add("MAINT");
  if (node.state & kNodeRebootIssuedFlag) add("REBOOTING");
  if (!why.empty() && !node.reason.empty()) why += ": " + node.reason;
  return why;
}

Status ChooseStepNodes(const Allocation& allocation, const StepNodeRequest& request, std::vector<std::string>* nodes,
                       std::vector<std::string>* unusable) {
  nodes->clear();
  unusable->clear();
  std::vector<std::string> usable;
  for (const NodeHealth& n : allocation.nodes) {
    if (request.exclude.count(n.name)) {
      unusable->push_back(n.name + " (excluded)");
      continue;
    }
    if (std::string why = Unusable(n); !why.empty()) {
      unusable->push_back(n.name + " (" + why + ")");
      continue;
    }
    usable.push_back(n.name);
  }
  const size_t min = request.min.value_or(request.count.value_or(1));
  if (request.count && request.min && *request.min > *request.count)
    return Status::InvalidArgument(kComponent, "--min " + std::to_string(*request.min) + " is more than --count " +
                                                   std::to_string(*request.count));
  if (usable.size() < min) {
    std::string left_out;
    for (const std::string& u : *unusable) left_out += (left_out.empty() ? "" : ", ") + u;
    return Status::Unavailable(
        kComponent, "job " + std::to_string(allocation.job) + " has " + std::to_string(usable.size()) +
                        " node(s) that can run a step, fewer than the " + std::to_string(min) + " asked for" +
                        (allocation.nodes.empty() ? std::string("; the controller lists no node for it")
                                                  : "; left out: " + (left_out.empty() ? std::string("none") : left_out)));
  }
  if (request.count && usable.size() > *request.count) usable.resize(*request.count);
  *nodes = std::move(usable);
  return Status::OK();
}

}  // namespace baton::launch
