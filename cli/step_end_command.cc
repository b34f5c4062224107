// baton step-end: the batch script records how a step ended (srun's exit
// status and error lines, and which of the step's nodes Slurm took out or
// marks unusable) in the job's event log, <dir>/events/<job>-batch.jsonl,
// so that `baton report` can name an interruption's cause that no rank could
// write (a node that died). `baton run` records the same itself; this is for
// a batch script of one's own that launches its steps.
#include <boost/program_options.hpp>

#include <chrono>
#include <iostream>

#include "base/events/step_end.h"
#include "base/launch/decimal.h"
#include "base/launch/lost_nodes.h"
#include "base/launch/quote.h"
#include "base/launch/slurm_queries.h"
#include "baton/identity.h"
#include "cli/batch_event_log.h"
#include "cli/commands.h"
#include "cli/error_text.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;

// The script is between two launches: the record must not hold it up.
constexpr std::chrono::seconds kSlurmLimit(15);

int Usage(const po::options_description& desc, const std::string& error) {
  std::cerr << "baton step-end: " << error << "\n" << desc;
  return 2;
}

}  // namespace

int StepEndCommand(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: baton step-end --exit RC --nodes HOSTLIST [--said TEXT] [--dir DIR] [--job ID]\n"
      "Appends a step_end record (srun's exit status, its error lines, the step's nodes that\n"
      "cannot run a step now and why) to DIR/events/<job>-batch.jsonl for baton report.\n"
      "Exit 0 when written (without Slurm's answer, the record says so); 1 when it could not\n"
      "be written; 2 for bad options.\n"
      "options");
  events::StepEnd end;
  std::string dir, job_text, exit_text;
  desc.add_options()("exit", po::value(&exit_text)->required(), "srun's exit status (0-255)")(
      "nodes", po::value(&end.nodes)->required(), "the step's nodes (a Slurm host list)")(
      "said", po::value(&end.said), "srun's error lines for the step")(
      "dir", po::value(&dir), "the checkpoint directory (default: BATON_CKPT_DIR)")(
      "job", po::value(&job_text), "the job (default: SLURM_JOB_ID)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Usage(desc, e.what());
  }
  long long exit = 0;
  if (!launch::ParseDecimal(exit_text, 0, 255, &exit))
    return Usage(desc, "--exit " + launch::Quoted(exit_text) + ": an exit status is 0 to 255");
  end.exit = static_cast<int>(exit);
  const auto env = ProcessEnvironment();
  auto get = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (dir.empty()) dir = get("BATON_CKPT_DIR");
  if (dir.empty()) return Usage(desc, "no --dir and BATON_CKPT_DIR is not set (where the job's event log is)");
  if (job_text.empty()) job_text = get("SLURM_JOB_ID");
  long long job = 0;
  if (!launch::ParseDecimal(job_text, 1, 0xfffffffeLL, &job))
    return Usage(desc, "job id " + launch::Quoted(job_text) + " is not a job id (give --job or run it in a job)");
  end.job = std::to_string(job);
  long long restart = 0;
  if (launch::ParseDecimal(get("SLURM_RESTART_COUNT"), 0, 1000000, &restart)) end.restart = static_cast<int>(restart);

  std::unique_ptr<launch::SlurmQueries> slurm =
      launch::WithDeadline(launch::Libslurm(), kSlurmLimit, "the controller must answer for baton step-end");
  std::vector<std::string> step_nodes;
  if (Status s = slurm->ExpandHostlist(end.nodes, launch::kMaxNodes, &step_nodes); !s.ok())
    return Usage(desc, "--nodes: " + ErrorText(s));
  if (Status s = launch::AskLostNodes(*slurm, get("SLURM_CONF"), "step-end", static_cast<uint32_t>(job), step_nodes,
                                      &end.lost);
      !s.ok())
    end.slurm_error = ErrorText(s);
  if (!end.slurm_error.empty())
    std::cerr << "baton step-end: " << end.slurm_error << " (recorded without the nodes' state)\n";
  if (Status s = AppendBatchRecord(dir, end.job, events::StepEndLine(end, NowSeconds())); !s.ok()) {
    std::cerr << "baton step-end: " << ErrorText(s) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace baton::cli
