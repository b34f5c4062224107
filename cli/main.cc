// baton: the command line tool. `baton help` lists the commands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "baton/version.h"
#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: baton COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  env [--format=sh|json]     the launch environment of this task or batch script\n"
    "                             (RANK, LOCAL_RANK, MASTER_ADDR, ...), derived from SLURM_*\n"
    "                             exactly as the spank_baton plugin derives it\n"
    "  hostfile [--format=F]      the hostfile of this step (openmpi, mpich, deepspeed,\n"
    "                             horovod, plain)\n"
    "  bench collectives [OPTS]   time baton's collectives against raw MPI, nccl-tests\n"
    "                             style (under srun or mpirun; --help for the options)\n"
    "  bench ckpt [OPTS]          time checkpoint save and restore against raw parallel\n"
    "                             writes and reads of the same bytes (under srun or mpirun)\n"
    "  run [OPTS] [--] PROGRAM [ARGS...]\n"
    "                             the job's step under srun inside the allocation: launched\n"
    "                             again after a lost node, exit 75 once for a stop, the\n"
    "                             program's status for a bug (--help for the options)\n"
    "  nodes --healthy [OPTS]     the nodes of this job's allocation that can run its next\n"
    "                             step, as a host list for srun -w (--count, --min, --exclude)\n"
    "  step-end --exit RC --nodes HOSTLIST [--said TEXT]\n"
    "                             record how a step ended (for baton report; batch scripts)\n"
    "  ckpt ls|inspect|verify|gc  list, describe, verify or prune a checkpoint directory\n"
    "  ckpt import|export         a DCP directory or torch.save file into a checkpoint\n"
    "                             version, and a version out to DCP's format or torch.save\n"
    "  report [DIR] [--json] [--plot FILE]\n"
    "                             a job's goodput from the event log beside its checkpoints:\n"
    "                             wall and productive time, lost steps, stalls, recoveries\n"
    "  bench manifest [OPTS]      time writing and parsing a large checkpoint manifest\n"
    "  version                    print baton's version\n"
    "  help                       print this text\n"
    "\n"
    "See baton(1).\n";

}  // namespace

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "version" || command == "--version") {
    std::printf("baton %s\n", baton::kVersion);
    return 0;
  }
  if (command == "env") return baton::cli::EnvCommand(args);
  if (command == "hostfile") return baton::cli::HostfileCommand(args);
  if (command == "bench") return baton::cli::BenchCommand(args);
  if (command == "run") return baton::cli::RunCommand(args);
  if (command == "nodes") return baton::cli::NodesCommand(args);
  if (command == "step-end") return baton::cli::StepEndCommand(args);
  if (command == "ckpt") return baton::cli::CkptCommand(args);
  if (command == "report") return baton::cli::ReportCommand(args);
  std::fprintf(stderr, "baton: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}

int main(int argc, char** argv) {
  // Bad input is reported by Status; an exception here is a bug or an
  // allocation failure, and still gets a message instead of an abort.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton: %s\n", e.what());
    return 1;
  }
}
