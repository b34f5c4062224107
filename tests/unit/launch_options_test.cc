// User options (--baton..., BATON_*) and plugstack.conf arguments: strict,
// every error names the option or key and the value.
#include "base/launch/options.h"

#include <gtest/gtest.h>

namespace baton::launch {
namespace {

Status FromArgs(const std::vector<std::string>& args, LaunchOptions* o) {
  return OptionsFromOccurrences(ScanCommandLine(args), o);
}

void ExpectNames(const Status& s, const std::string& a, const std::string& b) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(a), std::string::npos) << s;
  EXPECT_NE(s.message().find(b), std::string::npos) << s;
}

TEST(UserOptions, EveryOptionAcceptsItsValues) {
  LaunchOptions o;
  ASSERT_TRUE(SetOption("baton", nullptr, &o).ok());
  EXPECT_TRUE(*o.enabled);
  ASSERT_TRUE(SetOption("baton", "off", &o).ok());
  EXPECT_FALSE(*o.enabled);
  for (auto [text, f] : std::vector<std::pair<const char*, HostfileFormat>>{
           {"openmpi", HostfileFormat::kOpenMpi}, {"mpich", HostfileFormat::kMpich},
           {"deepspeed", HostfileFormat::kDeepSpeed}, {"horovod", HostfileFormat::kHorovod},
           {"plain", HostfileFormat::kPlain}}) {
    ASSERT_TRUE(SetOption("baton-hostfile-format", text, &o).ok()) << text;
    EXPECT_EQ(*o.hostfile, f);
    EXPECT_EQ(FormatName(f), text);
  }
  ASSERT_TRUE(SetOption("baton-master-port", "29500", &o).ok());
  EXPECT_EQ(*o.master_port, 29500);
  ASSERT_TRUE(SetOption("baton-gpu-bind", "local-rank", &o).ok());
  EXPECT_EQ(*o.gpu_bind, GpuBind::kLocalRank);
  ASSERT_TRUE(SetOption("baton-ckpt-dir", "/shared/ckpt", &o).ok());
  EXPECT_EQ(*o.ckpt_dir, "/shared/ckpt");
  ASSERT_TRUE(SetOption("baton-local-dir", "/local", &o).ok());
  EXPECT_EQ(*o.local_dir, "/local");
}

TEST(UserOptions, BadValuesNameOptionAndValue) {
  LaunchOptions o;
  ExpectNames(SetOption("baton", "maybe", &o), "--baton", "'maybe'");
  ExpectNames(SetOption("baton-hostfile-format", "slurm", &o), "--baton-hostfile-format", "'slurm'");
  ExpectNames(SetOption("baton-hostfile", "slurm", &o), "--baton-hostfile:", "'slurm'");
  ExpectNames(SetOption("baton-master-port", "70000", &o), "--baton-master-port", "'70000'");
  ExpectNames(SetOption("baton-master-port", "12ab", &o), "--baton-master-port", "'12ab'");
  ExpectNames(SetOption("baton-master-port", "0", &o), "--baton-master-port", "'0'");
  ExpectNames(SetOption("baton-gpu-bind", "all", &o), "--baton-gpu-bind", "'all'");
  ExpectNames(SetOption("baton-ckpt-dir", "relative/dir", &o), "--baton-ckpt-dir", "'relative/dir'");
  ExpectNames(SetOption("baton-local-dir", "", &o), "--baton-local-dir", "''");
  ExpectNames(SetOption("baton-ckpt-dir", "/a\tb", &o), "--baton-ckpt-dir", "'/a\\x09b'");
  ExpectNames(SetOption("baton-nope", "1", &o), "unknown option", "--baton-nope");
  EXPECT_FALSE(o.hostfile.has_value()) << "nothing set on error";
}

TEST(UserOptions, EnvironmentVariablesAreNamedInErrors) {
  LaunchOptions o;
  ASSERT_TRUE(OptionsFromEnvironment({{"BATON_ENABLE", "on"}, {"BATON_HOSTFILE_FORMAT", "mpich"},
                                      {"BATON_MASTER_PORT", "1234"}, {"BATON_GPU_BIND", "none"},
                                      {"BATON_CKPT_DIR", "/c"}, {"BATON_LOCAL_DIR", "/l"}, {"OTHER", "x"}},
                                     &o)
                  .ok());
  EXPECT_TRUE(*o.enabled);
  EXPECT_EQ(*o.hostfile, HostfileFormat::kMpich);
  EXPECT_EQ(*o.master_port, 1234);
  EXPECT_EQ(*o.ckpt_dir, "/c");
  ExpectNames(OptionsFromEnvironment({{"BATON_HOSTFILE_FORMAT", "xml"}}, &o), "BATON_HOSTFILE_FORMAT", "'xml'");
  LaunchOptions empty;
  ASSERT_TRUE(OptionsFromEnvironment({{"BATON_ENABLE", ""}}, &empty).ok());
  EXPECT_FALSE(empty.enabled.has_value()) << "empty means unset";
}

TEST(UserOptions, CommandLineForms) {
  LaunchOptions o;
  ASSERT_TRUE(FromArgs({"srun", "-N4", "--baton", "--baton-hostfile-format", "plain",
                                      "--baton-master-port=4000", "--other=1"},
                                     &o)
                  .ok());
  EXPECT_TRUE(*o.enabled);
  EXPECT_EQ(*o.hostfile, HostfileFormat::kPlain);
  EXPECT_EQ(*o.master_port, 4000);
}

TEST(UserOptions, ScanFindsEveryFormWithItsValue) {
  auto found = ScanCommandLine({"-N2", "--baton", "--baton-hostfile-format", "plain", "--baton-master-port=7", "--batonx", "prog"});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].name, "baton");
  EXPECT_FALSE(found[0].has_value);
  EXPECT_EQ(found[1].name, "baton-hostfile-format");
  EXPECT_EQ(found[1].value, "plain");
  EXPECT_EQ(found[2].value, "7");
}

TEST(UserOptions, ScanTakesTheAbbreviationsGetoptTakes) {
  // getopt_long (srun, sbatch) accepts any prefix that names one option.
  auto found = ScanCommandLine({"--baton-hostfile-f=mpich", "--baton-m", "29500", "--baton-g=none", "--baton-c=/c",
                                "--baton-l", "/l", "--baton=off"});
  ASSERT_EQ(found.size(), 6u);
  EXPECT_EQ(found[0].name, "baton-hostfile-format");
  EXPECT_EQ(found[0].value, "mpich");
  EXPECT_EQ(found[1].name, "baton-master-port");
  EXPECT_EQ(found[1].value, "29500");
  EXPECT_EQ(found[2].name, "baton-gpu-bind");
  EXPECT_EQ(found[3].name, "baton-ckpt-dir");
  EXPECT_EQ(found[4].name, "baton-local-dir");
  EXPECT_EQ(found[4].value, "/l");
  EXPECT_EQ(found[5].name, "baton") << "an exact name wins over the longer ones it prefixes";
  EXPECT_TRUE(ScanCommandLine({"--baton-", "x"}).empty()) << "ambiguous: srun refuses it itself";
  EXPECT_TRUE(ScanCommandLine({"--bat=on"}).empty()) << "ambiguous among baton's options";
  EXPECT_TRUE(ScanCommandLine({"--baton-host=mpich"}).empty()) << "the old name and the new one: ambiguous";
  auto old = ScanCommandLine({"--baton-hostfile", "mpich"});
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].name, "baton-hostfile") << "the old name exactly, as getopt_long takes it";
  auto optional = ScanCommandLine({"--baton", "on"});
  ASSERT_EQ(optional.size(), 1u);
  EXPECT_FALSE(optional[0].has_value) << "an optional value comes only with '='";
}

TEST(UserOptions, TheCommandLineWinsInEveryFormSrunAccepts) {
  // BATON_HOSTFILE_FORMAT=plain srun --baton-hostfile-f=mpich ...: the
  // callback sees --baton-hostfile-format=mpich; the scan must see the same
  // occurrence, or the variable would win over the command line.
  const std::map<std::string, std::string> env = {{"BATON_HOSTFILE_FORMAT", "plain"}, {"BATON_MASTER_PORT", "1111"}};
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-N1", "--baton-hostfile-format=mpich", "--baton-master-port=2222", "./prog"},
           {"-N1", "--baton-hostfile-format", "mpich", "--baton-master-port", "2222", "./prog"},
           {"-N1", "--baton-hostfile-f=mpich", "--baton-mas=2222", "./prog"},
           {"-N1", "--baton-hostfile-f", "mpich", "--baton-m", "2222", "./prog"}}) {
    LaunchOptions callbacks;
    ASSERT_TRUE(SetOption("baton-hostfile-format", "mpich", &callbacks).ok());
    ASSERT_TRUE(SetOption("baton-master-port", "2222", &callbacks).ok());
    std::vector<Occurrence> log = {{"baton-hostfile-format", "mpich", true}, {"baton-master-port", "2222", true}};
    LaunchOptions resolved;
    ASSERT_TRUE(ResolveSubmitOptions(args, log, env, callbacks, PluginConfig{}, &resolved).ok());
    EXPECT_EQ(*resolved.hostfile, HostfileFormat::kMpich) << args[1];
    EXPECT_EQ(*resolved.master_port, 2222) << args[1];
  }
  // #SBATCH --baton-hostfile-format=mpich (a callback without a
  // command-line word) loses to the variable.
  LaunchOptions callbacks;
  ASSERT_TRUE(SetOption("baton-hostfile-format", "mpich", &callbacks).ok());
  LaunchOptions resolved;
  ASSERT_TRUE(ResolveSubmitOptions({"job.sh"}, {{"baton-hostfile-format", "mpich", true}}, env, callbacks, PluginConfig{},
                                   &resolved)
                  .ok());
  EXPECT_EQ(*resolved.hostfile, HostfileFormat::kPlain);
  // A program's own argument is not srun's option.
  ASSERT_TRUE(ResolveSubmitOptions({"./prog", "--baton-hostfile-format=mpich"}, {}, env, {}, PluginConfig{}, &resolved).ok());
  EXPECT_EQ(*resolved.hostfile, HostfileFormat::kPlain);
}

TEST(UserOptions, TheOldHostfileNameStillWorksAndWarns) {
  // --baton-hostfile set a format while BATON_HOSTFILE is a path: the
  // option is --baton-hostfile-format now, the old name an alias.
  LaunchOptions o;
  ASSERT_TRUE(SetOption("baton-hostfile", "mpich", &o).ok());
  EXPECT_EQ(*o.hostfile, HostfileFormat::kMpich);
  ASSERT_TRUE(FromArgs({"srun", "--baton-hostfile", "plain"}, &o).ok());
  EXPECT_EQ(*o.hostfile, HostfileFormat::kPlain);
  const OptionSpec* old = nullptr;
  const OptionSpec* current = nullptr;
  for (const OptionSpec& spec : UserOptions()) {
    if (std::string(spec.name) == "baton-hostfile") old = &spec;
    if (std::string(spec.name) == "baton-hostfile-format") current = &spec;
  }
  ASSERT_NE(old, nullptr) << "the old name stays registered, so srun still accepts it";
  ASSERT_NE(current, nullptr);
  EXPECT_EQ(AliasWarning(*old), "--baton-hostfile is now --baton-hostfile-format; the old name still works but will go");
  EXPECT_EQ(AliasWarning(*current), "");
  EXPECT_EQ(std::string(old->env), current->env) << "one variable";
}

TEST(UserOptions, SameOptionTwiceWithDifferentValuesIsAnError) {
  LaunchOptions o;
  ExpectNames(FromArgs({"--baton-hostfile-format=mpich", "--baton-hostfile-format=plain"}, &o),
              "--baton-hostfile-format given twice", "'mpich' and 'plain'");
  ExpectNames(FromArgs({"--baton-hostfile=mpich", "--baton-hostfile-format=plain"}, &o),
              "--baton-hostfile and --baton-hostfile-format given twice", "'mpich' and 'plain'");
  ExpectNames(FromArgs({"--baton", "--baton=off"}, &o), "--baton given twice", "'off'");
  EXPECT_TRUE(FromArgs({"--baton-hostfile=mpich", "--baton-hostfile", "mpich"}, &o).ok())
      << "the same value twice is harmless";
}

TEST(UserOptions, MergeTakesTheFirstSourceThatSetsEachField) {
  LaunchOptions cmdline, env, script;
  cmdline.hostfile = HostfileFormat::kPlain;
  env.hostfile = HostfileFormat::kMpich;
  env.master_port = 1000;
  script.master_port = 2000;
  script.ckpt_dir = "/s";
  LaunchOptions m = Merge(cmdline, Merge(env, script));
  EXPECT_EQ(*m.hostfile, HostfileFormat::kPlain);
  EXPECT_EQ(*m.master_port, 1000);
  EXPECT_EQ(*m.ckpt_dir, "/s");
  EXPECT_FALSE(m.enabled.has_value());
}

TEST(UserOptions, ResolvedOptionsRoundTripThroughTheEnvironment) {
  LaunchOptions o;
  o.enabled = true;
  o.hostfile = HostfileFormat::kHorovod;
  o.master_port = 5;
  o.gpu_bind = GpuBind::kLocalRank;
  o.ckpt_dir = "/c";
  std::map<std::string, std::string> env;
  for (auto& [k, v] : OptionsAsEnvironment(o)) env[k] = v;
  LaunchOptions back;
  ASSERT_TRUE(OptionsFromEnvironment(env, &back).ok());
  EXPECT_EQ(*back.enabled, true);
  EXPECT_EQ(*back.hostfile, HostfileFormat::kHorovod);
  EXPECT_EQ(*back.master_port, 5);
  EXPECT_EQ(*back.gpu_bind, GpuBind::kLocalRank);
  EXPECT_EQ(*back.ckpt_dir, "/c");
  EXPECT_FALSE(back.local_dir.has_value());
}

TEST(PluginConfig, DefaultsAndEveryKey) {
  PluginConfig c;
  ASSERT_TRUE(ParsePluginConfig({}, &c).ok());
  EXPECT_FALSE(c.default_on);
  EXPECT_EQ(c.port_lo, 61000);
  EXPECT_EQ(c.port_hi, 65535);
  EXPECT_EQ(c.hostfile_dir, "") << "default: a fresh private directory, no predictable name";
  ExpectNames(ParsePluginConfig({"hostfile_dir=/scratch/baton-%u"}, &c), "hostfile_dir", "containing %j");
  ExpectNames(ParsePluginConfig({"hostfile_dir=/scratch/%j.%s"}, &c), "hostfile_dir", "containing %n");
  ASSERT_TRUE(ParsePluginConfig({"default=on", "port_range=20000-20100", "hostfile_dir=/var/baton/%u/%j-%s-%n",
                                 "gpu_bind=local-rank"},
                                &c)
                  .ok());
  EXPECT_TRUE(c.default_on);
  EXPECT_EQ(c.port_lo, 20000);
  EXPECT_EQ(c.port_hi, 20100);
  EXPECT_EQ(c.hostfile_dir, "/var/baton/%u/%j-%s-%n");
  EXPECT_EQ(c.gpu_bind, GpuBind::kLocalRank);
}

TEST(PluginConfig, UnknownKeysAndBadValuesNameBoth) {
  PluginConfig c;
  ExpectNames(ParsePluginConfig({"colour=blue"}, &c), "unknown key 'colour'", "colour=blue");
  ExpectNames(ParsePluginConfig({"default=maybe"}, &c), "default", "'maybe'");
  ExpectNames(ParsePluginConfig({"port_range=9-1"}, &c), "port_range", "'9-1'");
  ExpectNames(ParsePluginConfig({"port_range=100"}, &c), "port_range", "'100'");
  ExpectNames(ParsePluginConfig({"port_range=1-70000"}, &c), "port_range", "'1-70000'");
  ExpectNames(ParsePluginConfig({"hostfile_dir=/x/%q"}, &c), "hostfile_dir", "'/x/%q'");
  ExpectNames(ParsePluginConfig({"hostfile_dir=rel/%j"}, &c), "hostfile_dir", "'rel/%j'");
  ExpectNames(ParsePluginConfig({"gpu_bind=all"}, &c), "gpu_bind", "'all'");
  ExpectNames(ParsePluginConfig({"justaword"}, &c), "'justaword'", "key=value");
  // The sweep removes under local_root as root: only a plain absolute path.
  for (const char* bad : {"local_root=", "local_root=/", "local_root=rel/baton", "local_root=/a/../etc",
                          "local_root=/a/..", "local_root=/a\nb"})
    ExpectNames(ParsePluginConfig({bad}, &c), "local_root", "invalid value");
}

TEST(PluginConfig, LocalRootIsOffByDefaultAndTakesAPlainAbsolutePath) {
  PluginConfig c;
  ASSERT_TRUE(ParsePluginConfig({}, &c).ok());
  EXPECT_EQ(c.local_root, "") << "default: no node-local directory, no sweep";
  ASSERT_TRUE(ParsePluginConfig({"local_root=/local/baton"}, &c).ok());
  EXPECT_EQ(c.local_root, "/local/baton");
}

}  // namespace
}  // namespace baton::launch
