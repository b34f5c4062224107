// Subcommands of the `baton` command line tool, one file each.
#pragma once

#include <string>
#include <vector>

namespace baton::cli {

// Each takes the arguments after its name and returns the exit status.
int EnvCommand(const std::vector<std::string>& args);       // env_command.cc
int HostfileCommand(const std::vector<std::string>& args);  // env_command.cc
// `bench KIND ...`: dispatches to the benchmarks below (bench_command.cc).
int BenchCommand(const std::vector<std::string>& args);
// The benchmarks that run under srun/mpirun initialize MPI (baton::Runtime);
// nothing else in the tool does. Each takes the arguments after its name.
int BenchCollectivesCommand(const std::vector<std::string>& args);  // bench_collectives.cc
int BenchCkptCommand(const std::vector<std::string>& args);         // bench_ckpt.cc
int BenchCkptAsyncCommand(const std::vector<std::string>& args);    // bench_ckpt_async.cc
int BenchCkptLevelCommand(const std::vector<std::string>& args);    // bench_ckpt_level.cc
int BenchCkptReshardCommand(const std::vector<std::string>& args);  // bench_ckpt_reshard.cc
// `bench manifest`: writes and parses a large manifest in memory; no MPI.
int BenchManifestCommand(const std::vector<std::string>& args);     // bench_manifest.cc
// `nodes --healthy`: the nodes of this job that can run its next step (nodes_command.cc).
int NodesCommand(const std::vector<std::string>& args);
int StepEndCommand(const std::vector<std::string>& args);  // step_end_command.cc
// `run [OPTIONS] PROGRAM ...`: the job's step under srun, launched again inside the
// allocation or ended by how it ended (run_command.cc; the decision: base/launch/step_verdict.h).
int RunCommand(const std::vector<std::string>& args);
// `ckpt ls|inspect|verify|gc`: MPI-free (ckpt_command.cc).
int CkptCommand(const std::vector<std::string>& args);
// `ckpt import|export` (after `sub`): hands over to Python's baton.dcp (ckpt_convert_command.cc).
int CkptConvertCommand(const std::string& sub, const std::vector<std::string>& args);
int ReportCommand(const std::vector<std::string>& args);  // report_command.cc

}  // namespace baton::cli
