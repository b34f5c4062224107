#include "mpi_runtime/open_mpi_mtl.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "baton_config.h"

namespace baton::mpi {
namespace {

// Variables with which Open MPI reads other parameter files than the two
// defaults, or finds its sysconfdir elsewhere: then the files' value is not
// the one baton would read.
constexpr const char* kEnvDecides[] = {
    "OMPI_MCA_mtl",
    "OMPI_MCA_mca_base_param_files",
    "OMPI_MCA_mca_param_files",
    "OMPI_MCA_mca_base_param_file_prefix",
    "OMPI_MCA_mca_base_param_file_path",
    "OMPI_MCA_mca_base_envar_file_prefix",
    "OMPI_MCA_mca_base_override_param_file",
    "OPAL_PREFIX",
    "OPAL_SYSCONFDIR",
};

// Parameters in a file that make it read other files.
constexpr const char* kFileDecides[] = {"mca_base_param_files", "mca_param_files", "mca_base_param_file_prefix",
                                        "mca_base_envar_file_prefix", "mca_base_override_param_file"};

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    item = Trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool HasEntryWithPrefix(const std::string& dir, const std::vector<std::string>& prefixes) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    for (const auto& p : prefixes) found = found || name.compare(0, p.size(), p) == 0;
  }
  closedir(d);
  return found;
}

// Reads mtl from one parameter file into *mtl: false when it holds what baton does not read.
// A missing file is an empty one (Open MPI skips it too).
bool ReadParamFile(const std::string& path, std::optional<std::string>* mtl) {
  std::ifstream f(path);
  if (!f.is_open()) return true;
  std::stringstream text;
  text << f.rdbuf();
  if (f.bad()) return false;
  bool unparsed = false;
  *mtl = ParamFileValue(text.str(), "mtl", &unparsed);
  for (const char* name : kFileDecides) {
    if (ParamFileValue(text.str(), name, &unparsed).has_value()) unparsed = true;
  }
  return !unparsed;
}

}  // namespace

std::optional<std::string> ParamFileValue(const std::string& text, const std::string& name, bool* unparsed) {
  std::optional<std::string> value;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (Trim(line.substr(0, eq)) != name) continue;
    const std::string v = eq == std::string::npos ? "" : Trim(line.substr(eq + 1));
    if (v.empty() || v.find_first_of("\"'#") != std::string::npos) {
      *unparsed = true;
      continue;
    }
    value = v;  // the last line wins
  }
  return value;
}

std::optional<std::string> MtlSetting(const MtlFacts& facts) {
  if (facts.env_decides || facts.override_sets || facts.unparsed) return std::nullopt;
  std::vector<std::string> excluded;
  if (facts.files.has_value()) {
    const std::string& v = *facts.files;
    // An include list names the components wanted: psm or psm2 only where the site asked for them.
    if (v.empty() || v[0] != '^') return std::nullopt;
    excluded = SplitCommas(v.substr(1));
  }
  std::string value = "^";
  for (const auto& e : excluded) value += e + ",";
  bool added = false;
  for (const auto& [name, present] : {std::pair<std::string, bool>{"psm", facts.truescale},
                                      std::pair<std::string, bool>{"psm2", facts.omnipath}}) {
    bool listed = false;
    for (const auto& e : excluded) listed = listed || e == name;
    if (present || listed) continue;
    value += name + ",";
    added = true;
  }
  if (!added) return std::nullopt;
  value.pop_back();
  return value;
}

MtlFacts ReadMtlFacts(const MtlPaths& paths, const char* (*getenv)(const char*)) {
  MtlFacts facts;
  for (const char* name : kEnvDecides) {
    if (getenv(name) != nullptr) facts.env_decides = true;
  }
  struct stat st;
  if (paths.sysconfdir.empty() || stat(paths.sysconfdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    facts.unparsed = true;  // not the Open MPI baton was built with, or not known: leave it alone
  } else {
    std::optional<std::string> over, system, home;
    if (!ReadParamFile(paths.sysconfdir + "/openmpi-mca-params-override.conf", &over)) facts.unparsed = true;
    facts.override_sets = over.has_value();
    if (!ReadParamFile(paths.sysconfdir + "/openmpi-mca-params.conf", &system)) facts.unparsed = true;
    if (!paths.home.empty() && !ReadParamFile(paths.home + "/.openmpi/mca-params.conf", &home)) {
      facts.unparsed = true;
    }
    facts.files = home.has_value() ? home : system;  // the user's file beats the system's
  }
  facts.omnipath = getenv("PSM2_DEVICES") != nullptr || HasEntryWithPrefix(paths.dev, {"hfi1"}) ||
                   HasEntryWithPrefix(paths.ib_class, {"hfi1"});
  facts.truescale = HasEntryWithPrefix(paths.dev, {"ipath"}) || HasEntryWithPrefix(paths.ib_class, {"qib", "ipath"});
  return facts;
}

std::string SkipAbsentPsm() {
  MtlPaths paths;
  paths.sysconfdir = BATON_OMPI_SYSCONFDIR;
  const char* home = std::getenv("HOME");
  paths.home = home == nullptr ? "" : home;
  const auto value = MtlSetting(ReadMtlFacts(paths, [](const char* name) -> const char* { return std::getenv(name); }));
  if (!value.has_value()) return "";
  setenv("OMPI_MCA_mtl", value->c_str(), 0);
  return *value;
}

}  // namespace baton::mpi
