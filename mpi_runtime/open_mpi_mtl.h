// Which of Open MPI's PSM matching transports a process may skip at MPI_Init.
//
// Open MPI 4.1 opens its mtl components while it chooses a PML, and opening
// psm2 (Omni-Path) and psm (TrueScale) dlopens libpsm2 and
// libpsm_infinipath, whose constructors each calibrate a clock for 0.1 s
// (strace: a loop of 125 us sleeps), whether or not the node has the
// adapter. Debian's and Ubuntu's Open MPI depend on both libraries: every
// process there spent 0.2 s of a 0.25 s MPI_Init on them (mpirun and
// srun --mpi=pmix alike; docs/benchmarks.md). Without the adapter the
// component declines anyway, so leaving it out selects what Open MPI would
// select; each process decides for its own node, as Open MPI does.
//
// The setting is OMPI_MCA_mtl, which replaces (does not extend) the value of
// Open MPI's parameter files: Debian's says "mtl = ^ofi". So the files'
// value is read and extended, and nothing is set where baton cannot know the
// whole value: the variable is set, a parameter-file variable or relocation
// is set, the override file names mtl, the files give an include list or a
// value baton does not parse, or the configure-time sysconfdir is unknown.
// MPI-free: tests/unit/open_mpi_mtl_test.cc decides every case.
#pragma once

#include <optional>
#include <string>

namespace baton::mpi {

// What the decision needs, gathered by ReadMtlFacts (or a test).
struct MtlFacts {
  bool env_decides = false;            // OMPI_MCA_mtl, or a variable that changes which files Open MPI reads
  bool override_sets = false;          // openmpi-mca-params-override.conf names mtl (beats the environment)
  bool unparsed = false;               // a parameter file could not be read or its mtl line not parsed
  std::optional<std::string> files;    // mtl from $HOME/.openmpi/mca-params.conf, else the system file
  bool omnipath = false;               // an hfi1 device (psm2's adapter) on this node, or PSM2_DEVICES set
  bool truescale = false;              // a qib/ipath device (psm's adapter) on this node
};

// OMPI_MCA_mtl's value for this process, or nothing to leave Open MPI alone.
// Pure.
std::optional<std::string> MtlSetting(const MtlFacts& facts);

// Where ReadMtlFacts looks (tests point these at a temporary directory).
struct MtlPaths {
  std::string sysconfdir;     // Open MPI's (configure: ompi_info --path sysconfdir); empty: unknown
  std::string home;           // $HOME; empty: none
  std::string dev = "/dev";
  std::string ib_class = "/sys/class/infiniband";
};

// The facts for this process: `getenv` reads the environment.
MtlFacts ReadMtlFacts(const MtlPaths& paths, const char* (*getenv)(const char*));

// The value of `name` in an Open MPI parameter file's text ("name = value"
// lines, '#' comments): nothing when absent; *unparsed set when a line names
// it in a form this does not read (quotes, an empty value).
std::optional<std::string> ParamFileValue(const std::string& text, const std::string& name, bool* unparsed);

// Sets OMPI_MCA_mtl where MtlSetting says, before MPI_Init and before any
// thread of the process reads the environment; returns the value set, or
// empty. Runtime::Create calls it when MPI is not initialized yet.
std::string SkipAbsentPsm();

}  // namespace baton::mpi
