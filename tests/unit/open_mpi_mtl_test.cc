// Which PSM transports a process leaves out of Open MPI's MPI_Init
// (mpi_runtime/open_mpi_mtl.h, issue 47 item 10: 0.2 s of a 0.25 s MPI_Init
// went to loading libpsm2 and libpsm_infinipath on nodes without their
// adapters). What must hold: the files' value is extended, never replaced;
// nothing is set where the environment, an override or an unread form
// decides; an adapter on the node keeps its transport.
#include "mpi_runtime/open_mpi_mtl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace baton::mpi {
namespace {

namespace fs = std::filesystem;

MtlFacts Files(std::optional<std::string> value) {
  MtlFacts f;
  f.files = std::move(value);
  return f;
}

TEST(OpenMpiMtl, NoAdapterExtendsTheFilesExclusionAndNeverReplacesIt) {
  EXPECT_EQ(MtlSetting(Files("^ofi")), "^ofi,psm,psm2");  // Debian's file: ofi stays out
  EXPECT_EQ(MtlSetting(Files(std::nullopt)), "^psm,psm2");
  EXPECT_EQ(MtlSetting(Files("^ofi, psm2")), "^ofi,psm2,psm");
  EXPECT_EQ(MtlSetting(Files("^psm,psm2")), std::nullopt);  // nothing to add: the environment stays as it is
}

TEST(OpenMpiMtl, AnAdapterOnTheNodeKeepsItsTransport) {
  MtlFacts f = Files("^ofi");
  f.omnipath = true;
  EXPECT_EQ(MtlSetting(f), "^ofi,psm");
  f.truescale = true;
  EXPECT_EQ(MtlSetting(f), std::nullopt);
  f.omnipath = false;
  EXPECT_EQ(MtlSetting(f), "^ofi,psm2");
}

TEST(OpenMpiMtl, WhereBatonCannotKnowTheWholeValueItSetsNothing) {
  MtlFacts f = Files("^ofi");
  f.env_decides = true;
  EXPECT_EQ(MtlSetting(f), std::nullopt);
  f = Files("^ofi");
  f.override_sets = true;
  EXPECT_EQ(MtlSetting(f), std::nullopt);
  f = Files("^ofi");
  f.unparsed = true;
  EXPECT_EQ(MtlSetting(f), std::nullopt);
  EXPECT_EQ(MtlSetting(Files("psm2,ofi")), std::nullopt);  // an include list is the site's choice
  EXPECT_EQ(MtlSetting(Files("")), std::nullopt);
}

TEST(OpenMpiMtl, ParamFileLinesAsOpenMpiWritesThem) {
  bool unparsed = false;
  EXPECT_EQ(ParamFileValue("# mtl = ^x\nbtl = ^uct\n  mtl =  ^ofi  \n", "mtl", &unparsed), "^ofi");
  EXPECT_FALSE(unparsed);
  EXPECT_EQ(ParamFileValue("mtl_base_verbose = 1\n", "mtl", &unparsed), std::nullopt);
  EXPECT_EQ(ParamFileValue("mtl=^a\nmtl=^b\n", "mtl", &unparsed), "^b");
  EXPECT_FALSE(unparsed);
  ParamFileValue("mtl = \"^ofi\"\n", "mtl", &unparsed);
  EXPECT_TRUE(unparsed);
  unparsed = false;
  ParamFileValue("mtl =\n", "mtl", &unparsed);
  EXPECT_TRUE(unparsed);
}

// The facts from a fake sysconfdir, home and device directories.
class MtlFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/baton-mtl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(&tmpl[0]), nullptr) << tmpl;
    root_ = tmpl;
    for (const char* d : {"etc", "home/.openmpi", "dev", "ib"}) fs::create_directories(root_ / d);
    paths_.sysconfdir = (root_ / "etc").string();
    paths_.home = (root_ / "home").string();
    paths_.dev = (root_ / "dev").string();
    paths_.ib_class = (root_ / "ib").string();
    env_.clear();
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
  MtlFacts Read() {
    return ReadMtlFacts(paths_, [](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }

  fs::path root_;
  MtlPaths paths_;
  static std::map<std::string, std::string> env_;
};
std::map<std::string, std::string> MtlFiles::env_;

TEST_F(MtlFiles, TheUsersFileBeatsTheSystemsAndNoAdapterIsFound) {
  Write("etc/openmpi-mca-params.conf", "mtl = ^ofi\n");
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm,psm2");
  Write("home/.openmpi/mca-params.conf", "mtl = ^ofi,psm\n");
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm,psm2");
  Write("home/.openmpi/mca-params.conf", "mtl = psm2\n");
  EXPECT_EQ(MtlSetting(Read()), std::nullopt);
}

TEST_F(MtlFiles, AdaptersAndEnvironmentAreSeen) {
  Write("etc/openmpi-mca-params.conf", "mtl = ^ofi\n");
  Write("dev/hfi1_0", "");
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm");
  fs::remove(root_ / "dev/hfi1_0");
  fs::create_directories(root_ / "ib/qib0");
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm2");
  fs::remove(root_ / "ib/qib0");
  env_["PSM2_DEVICES"] = "self,shm";  // PSM2 without an adapter, asked for by name
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm");
  env_.clear();
  for (const char* name : {"OMPI_MCA_mtl", "OMPI_MCA_mca_base_param_files", "OPAL_PREFIX"}) {
    env_ = {{name, "x"}};
    EXPECT_EQ(MtlSetting(Read()), std::nullopt) << name;
  }
}

TEST_F(MtlFiles, AnOverrideAnUnreadLineOrAnUnknownSysconfdirLeavesOpenMpiAlone) {
  Write("etc/openmpi-mca-params.conf", "mtl = ^ofi\n");
  Write("etc/openmpi-mca-params-override.conf", "mtl = ^ofi\n");
  EXPECT_EQ(MtlSetting(Read()), std::nullopt);
  fs::remove(root_ / "etc/openmpi-mca-params-override.conf");
  Write("home/.openmpi/mca-params.conf", "mca_base_param_files = /elsewhere.conf\n");
  EXPECT_EQ(MtlSetting(Read()), std::nullopt);
  fs::remove(root_ / "home/.openmpi/mca-params.conf");
  EXPECT_EQ(MtlSetting(Read()), "^ofi,psm,psm2");
  paths_.sysconfdir = (root_ / "nonexistent").string();
  EXPECT_EQ(MtlSetting(Read()), std::nullopt);
  paths_.sysconfdir.clear();
  EXPECT_EQ(MtlSetting(Read()), std::nullopt);
}

}  // namespace
}  // namespace baton::mpi
