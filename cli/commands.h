// Subcommands of the `baton` command line tool, one file each.
#pragma once

#include <string>
#include <vector>

namespace baton::cli {

// Each takes the arguments after its name and returns the exit status.
int EnvCommand(const std::vector<std::string>& args);       // env_command.cc
int HostfileCommand(const std::vector<std::string>& args);  // env_command.cc
// `bench collectives ...`: initializes MPI (baton::Runtime), unlike the others.
int BenchCommand(const std::vector<std::string>& args);     // bench_collectives.cc
// `bench manifest ...`: writes and parses a large manifest in memory; no MPI.
int BenchManifestCommand(const std::vector<std::string>& args);  // bench_manifest.cc

}  // namespace baton::cli
