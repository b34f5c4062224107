// baton nodes --healthy: which nodes of this job's allocation can run its
// next step, as a Slurm host list for `srun -w` (for a batch script of one's
// own; `baton run` makes the same choice before each launch).
#include <boost/program_options.hpp>

#include <sys/stat.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include "base/launch/allocation_nodes.h"
#include "base/launch/decimal.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_queries.h"
#include "baton/identity.h"
#include "cli/commands.h"
#include "cli/error_text.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;

// libslurm retries a missing slurm.conf or a silent controller for a
// minute; a batch script deciding where to relaunch should not.
constexpr std::chrono::seconds kSlurmLimit(15);

int Usage(const po::options_description& desc, const std::string& error) {
  std::cerr << "baton nodes: " << error << "\n" << desc;
  return 2;
}

}  // namespace

int NodesCommand(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: baton nodes --healthy [--count N] [--min M] [--exclude HOSTLIST] [--job ID]\n"
      "Prints the nodes of the job's allocation that can run its next step (not DOWN,\n"
      "DRAIN, FAIL or NOT_RESPONDING), as a host list for srun -w. Exit 0; 1 when fewer than\n"
      "--min (default: --count, or 1) can, or Slurm did not answer; 2 for bad options.\n"
      "options");
  bool healthy = false, verbose = false;
  std::string job_text, exclude;
  long long count = 0, min = 0;
  desc.add_options()("healthy", po::bool_switch(&healthy), "the nodes that can run a step (required)")(
      "count", po::value(&count), "the first N of them")(
      "min", po::value(&min), "fail when fewer than M can (default: --count, or 1)")(
      "exclude", po::value(&exclude), "leave these nodes out (a Slurm host list)")(
      "job", po::value(&job_text), "the job (default: SLURM_JOB_ID)")(
      "verbose,v", po::bool_switch(&verbose), "also print the nodes left out and why, on stderr");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Usage(desc, e.what());
  }
  if (!healthy) return Usage(desc, "--healthy is required (the only question this command answers)");
  launch::StepNodeRequest request;
  if (vm.count("count")) {
    if (count < 1) return Usage(desc, "--count " + std::to_string(count) + ": at least 1");
    request.count = static_cast<size_t>(count);
  }
  if (vm.count("min")) {
    if (min < 1) return Usage(desc, "--min " + std::to_string(min) + ": at least 1");
    request.min = static_cast<size_t>(min);
  }
  // Known from the options alone: refused before asking Slurm, so that a
  // batch script's mistake is exit 2 wherever it runs (not Slurm's exit 1).
  if (request.count && request.min && *request.min > *request.count)
    return Usage(desc, "--min " + std::to_string(*request.min) + " is more than --count " +
                           std::to_string(*request.count) + " (a step cannot need more nodes than it runs on)");
  const auto env = ProcessEnvironment();
  if (!vm.count("job")) {
    auto it = env.find("SLURM_JOB_ID");
    if (it == env.end()) return Usage(desc, "no --job and SLURM_JOB_ID is not set (run it in a job, or name the job)");
    job_text = it->second;
  }
  long long job = 0;
  if (!launch::ParseDecimal(job_text, 1, 0xfffffffeLL, &job))
    return Usage(desc, "job id " + launch::Quoted(job_text) + " is not a job id");
  if (auto conf = env.find("SLURM_CONF"); conf != env.end()) {
    struct stat st;
    if (stat(conf->second.c_str(), &st) != 0) {
      std::cerr << "baton nodes: SLURM_CONF=" << launch::Quoted(conf->second)
                << " names no file; baton needs Slurm's configuration to ask the controller\n";
      return 1;
    }
  }
  std::unique_ptr<launch::SlurmQueries> slurm =
      launch::WithDeadline(launch::Libslurm(), kSlurmLimit, "the controller must answer for baton nodes");
  if (!exclude.empty()) {
    std::vector<std::string> hosts;
    if (Status s = slurm->ExpandHostlist(exclude, launch::kMaxNodes, &hosts); !s.ok())
      return Usage(desc, "--exclude: " + ErrorText(s));
    request.exclude.insert(hosts.begin(), hosts.end());
  }
  launch::Allocation allocation;
  if (Status s = slurm->AllocationNodes(static_cast<uint32_t>(job), &allocation); !s.ok()) {
    std::cerr << "baton nodes: " << ErrorText(s) << "\n";
    return 1;
  }
  std::vector<std::string> nodes, unusable;
  Status s = launch::ChooseStepNodes(allocation, request, &nodes, &unusable);
  if (!s.ok()) {
    std::cerr << "baton nodes: " << ErrorText(s) << "\n";
    return s.code() == Code::kInvalidArgument ? 2 : 1;
  }
  if (verbose) {
    std::ostringstream left;
    for (const std::string& u : unusable) left << (left.tellp() > 0 ? ", " : "") << u;
    std::cerr << "baton nodes: job " << job << " holds " << allocation.nodes.size() << " node(s); left out: "
              << (unusable.empty() ? std::string("none") : left.str()) << "\n";
  }
  std::string list;
  if (Status c = slurm->CompressHostlist(nodes, &list); !c.ok()) {
    std::cerr << "baton nodes: " << ErrorText(c) << "\n";
    return 1;
  }
  std::cout << list << "\n";
  return 0;
}

}  // namespace baton::cli
