// Each hostfile format read back with its consumer's own grammar, as the
// consumer's documentation gives it, with the documentation's examples:
//   Open MPI (mpirun --hostfile): "aa slots=2" lines, '#' comments;
//   Horovod (horovodrun --hostfile): "aa slots=2" lines (its -H takes
//     "aa:2,bb:2", a command-line syntax, not a file);
//   DeepSpeed (deepspeed --hostfile): "worker-1 slots=4", slots = GPUs;
//   MPICH Hydra (mpiexec -f): "donner:2" lines, or a bare host for 1;
//   plain: one host per line, one line per rank.
#include "base/launch/launch_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "base/launch/slurm_facts.h"

namespace baton::launch {
namespace {

using Slots = std::vector<std::pair<std::string, int>>;

// Parses `text` line by line with `line_re` (host in group 1, slots in
// group 2, or 1 when the group did not match); '#' starts a comment, blank
// lines are skipped. A line the grammar refuses is a test failure.
Slots Parse(const std::string& text, const std::regex& line_re, const char* consumer) {
  Slots out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) {
      ADD_FAILURE() << consumer << " cannot read the line '" << line << "' of:\n" << text;
      continue;
    }
    out.emplace_back(m[1].str(), m[2].matched ? std::stoi(m[2].str()) : 1);
  }
  return out;
}

const std::regex kOpenMpi(R"(\s*([^\s=]+)(?:\s+slots\s*=\s*(\d+))?(?:\s+max_slots\s*=\s*\d+)?\s*)");
const std::regex kSlotsOnly(R"((\S+)\s+slots=(\d+)\s*)");  // Horovod and DeepSpeed
const std::regex kHydra(R"(\s*([^\s:]+)(?::(\d+))?\s*)");
const std::regex kOneHost(R"(\s*(\S+)\s*)");

TEST(HostfileGrammars, TheConsumersDocumentedExamplesParse) {
  EXPECT_EQ(Parse("aa slots=2\nbb slots=2\ncc slots=2\n", kOpenMpi, "Open MPI"),
            (Slots{{"aa", 2}, {"bb", 2}, {"cc", 2}}));
  EXPECT_EQ(Parse("aa slots=2\nbb slots=2\ncc slots=2\n", kSlotsOnly, "Horovod"),
            (Slots{{"aa", 2}, {"bb", 2}, {"cc", 2}}));
  EXPECT_EQ(Parse("worker-1 slots=4\nworker-2 slots=4\n", kSlotsOnly, "DeepSpeed"),
            (Slots{{"worker-1", 4}, {"worker-2", 4}}));
  EXPECT_EQ(Parse("donner:2  # The first 2 procs are scheduled to run here\nfoo\n", kHydra, "MPICH"),
            (Slots{{"donner", 2}, {"foo", 1}}));
}

StepInfo Cyclic5() {
  StepInfo info;
  Status s = LayoutFromNodeTasks({"n1", "n2", "n3"}, {{0, 2}, {1, 3}, {4}}, &info.layout);  // cyclic, uneven
  EXPECT_TRUE(s.ok()) << s;
  return info;
}

TEST(Hostfile, EveryFormatParsesWithItsConsumersGrammar) {
  const StepInfo info = Cyclic5();
  const Slots tasks = {{"n1", 2}, {"n2", 2}, {"n3", 1}};
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kOpenMpi, info), kOpenMpi, "Open MPI"), tasks);
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kHorovod, info), kSlotsOnly, "Horovod"), tasks);
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kDeepSpeed, info), kSlotsOnly, "DeepSpeed"), tasks)
      << "GPUs unknown: slots are the tasks";
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kMpich, info), kHydra, "MPICH"), tasks);
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kPlain, info), kOneHost, "plain"),
            (Slots{{"n1", 1}, {"n2", 1}, {"n1", 1}, {"n2", 1}, {"n3", 1}}))
      << "one line per rank, in rank order";
}

TEST(Hostfile, DeepSpeedSlotsAreGpusWhenSlurmSaysHowMany) {
  StepInfo info = Cyclic5();
  info.gpus_per_node = 4;
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kDeepSpeed, info), kSlotsOnly, "DeepSpeed"),
            (Slots{{"n1", 4}, {"n2", 4}, {"n3", 4}}));
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kOpenMpi, info), kOpenMpi, "Open MPI"),
            (Slots{{"n1", 2}, {"n2", 2}, {"n3", 1}}))
      << "MPI's slots stay the tasks";
}

// The consumers' parsers, as their sources read a line (rules restated
// here, not their code), where a regular expression would accept what the
// parser refuses:
//   DeepSpeed (deepspeed/launcher/runner.py, _parse_hostfile): a line must
//     match ^(\S+)\s+slots=(\d+); a host named twice is an error.
//   Horovod (horovod/runner/common/util/hosts.py, parse_host_files then
//     HostInfo.from_string): host = the line's first word, slots = what
//     follows '='; the two are joined as "host:slots" and split at ':' into
//     exactly two parts, so a host with a ':' (IPv6) fails.
//   MPICH Hydra (HYDU_parse_hostfile, process_mfile_token): the first word
//     is cut at every ':'; the first piece is the host, the second the
//     count, so "fd00::1:4" reads as host "fd00".
bool DeepSpeedParses(const std::string& text, Slots* out) {
  static const std::regex line_re(R"(^(\S+)\s+slots=(\d+))");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    if (!std::regex_search(line, m, line_re)) return false;
    for (const auto& [host, slots] : *out)
      if (host == m[1].str()) return false;  // "Hostfile contains multiple entries"
    out->emplace_back(m[1].str(), std::stoi(m[2].str()));
  }
  return true;
}

bool HorovodParses(const std::string& text, Slots* out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string host;
    if (!(words >> host) || line.find('=') == std::string::npos) return false;
    const std::string joined = host + ":" + line.substr(line.find('=') + 1);
    if (std::count(joined.begin(), joined.end(), ':') != 1) return false;  // "too many values to unpack"
    out->emplace_back(host, std::stoi(joined.substr(joined.find(':') + 1)));
  }
  return true;
}

Slots HydraReads(const std::string& text) {
  Slots out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first;
    if (!(words >> first) || first[0] == '#') continue;
    std::vector<std::string> pieces;
    std::istringstream cut(first);
    for (std::string p; std::getline(cut, p, ':');)
      if (!p.empty()) pieces.push_back(p);  // strtok skips empty pieces
    out.emplace_back(pieces.at(0), pieces.size() > 1 ? std::atoi(pieces[1].c_str()) : 1);
  }
  return out;
}

TEST(Hostfile, SrunLaunchersGetNodeNamesSshLaunchersGetAddresses) {
  // NodeAddr differs from NodeName: mpirun and Hydra start their daemons
  // with srun --nodelist=<the file's hosts> and mpirun checks them against
  // the allocation's node names; pdsh (DeepSpeed) and horovodrun ssh to
  // what the file says.
  StepInfo info = Cyclic5();
  info.hosts = {"10.1.0.11", "10.1.0.12", "10.1.0.13"};
  const Slots names = {{"n1", 2}, {"n2", 2}, {"n3", 1}};
  const Slots addrs = {{"10.1.0.11", 2}, {"10.1.0.12", 2}, {"10.1.0.13", 1}};
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kOpenMpi, info), kOpenMpi, "Open MPI"), names);
  EXPECT_EQ(HydraReads(FormatHostfile(HostfileFormat::kMpich, info)), names);
  Slots ds, hvd;
  EXPECT_TRUE(DeepSpeedParses(FormatHostfile(HostfileFormat::kDeepSpeed, info), &ds));
  EXPECT_EQ(ds, addrs);
  EXPECT_TRUE(HorovodParses(FormatHostfile(HostfileFormat::kHorovod, info), &hvd));
  EXPECT_EQ(hvd, addrs);
  EXPECT_EQ(Parse(FormatHostfile(HostfileFormat::kPlain, info), kOneHost, "plain").front().first, "10.1.0.11");
}

TEST(Hostfile, Ipv6NodeAddrsNeverReachAParserThatSplitsAtColons) {
  StepInfo info = Cyclic5();
  info.hosts = {"fd00::1:4", "fd00::1:5", "fd00::1:6"};
  const Slots names = {{"n1", 2}, {"n2", 2}, {"n3", 1}};
  const std::string mpich = FormatHostfile(HostfileFormat::kMpich, info);
  EXPECT_EQ(mpich.find("fd00"), std::string::npos) << mpich;
  EXPECT_EQ(HydraReads(mpich), names);
  Slots hvd;
  EXPECT_TRUE(HorovodParses(FormatHostfile(HostfileFormat::kHorovod, info), &hvd));
  EXPECT_EQ(hvd, names) << "Horovod cannot read an IPv6 host: the node name stands";
  Slots ds;
  EXPECT_TRUE(DeepSpeedParses(FormatHostfile(HostfileFormat::kDeepSpeed, info), &ds));
  EXPECT_EQ(ds, (Slots{{"fd00::1:4", 2}, {"fd00::1:5", 2}, {"fd00::1:6", 1}})) << "DeepSpeed's pattern reads it";
  // The rules above are the parsers': an IPv6 host breaks the two that split at ':'.
  Slots bad;
  EXPECT_FALSE(HorovodParses("fd00::1:4 slots=2\n", &bad));
  EXPECT_EQ(HydraReads("fd00::1:4:2\n").front().first, "fd00");
}

// --- the GPUs per node Slurm states -------------------------------------------------

TEST(GpusPerNode, FromSlurmsPerNodeRequests) {
  auto gpus = [](Env env) {
    std::optional<int> g;
    Status s = GpusPerNodeFromEnvironment(env, &g);
    EXPECT_TRUE(s.ok()) << s;
    return g;
  };
  EXPECT_EQ(gpus({}), std::nullopt);
  EXPECT_EQ(gpus({{"SLURM_GPUS_PER_NODE", "4"}}), 4);
  EXPECT_EQ(gpus({{"SLURM_GPUS_PER_NODE", "a100:2"}}), 2);
  EXPECT_EQ(gpus({{"SLURM_GPUS_PER_NODE", "a100:2,v100:1"}}), 3);
  EXPECT_EQ(gpus({{"SLURM_TRES_PER_NODE", "gres:gpu:2"}}), 2);
  EXPECT_EQ(gpus({{"SLURM_TRES_PER_NODE", "gres/gpu:a100:8,gres/nic:1"}}), 8);
  EXPECT_EQ(gpus({{"SLURM_TRES_PER_NODE", "gres:nic:1"}}), std::nullopt);
  std::optional<int> tres;
  ASSERT_TRUE(ParseGpuCount("TresPerNode", "gres:gpu:2", true, &tres).ok()) << "scontrol show job's TresPerNode";
  EXPECT_EQ(tres, 2);
  ASSERT_TRUE(ParseGpuCount("TresPerNode", "gres:gpumem:4G", true, &tres).ok());
  EXPECT_EQ(tres, std::nullopt) << "GPU memory is not GPUs";
  std::optional<int> g;
  Status s = GpusPerNodeFromEnvironment({{"SLURM_GPUS_PER_NODE", "a100:lots"}}, &g);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("SLURM_GPUS_PER_NODE='a100:lots'"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton::launch
