// baton ckpt import|export: into and out of baton's format, through the
// Python package's converter (python/baton/dcp/convert.py). DCP's metadata
// is a pickle of torch classes and a torch.save file is a pickle too, so
// only Python with torch can read them: this command checks its options
// (program_options, strictly, as the other ckpt subcommands), finds the
// interpreter and the package, and replaces itself with
// `python -m baton.dcp ...`'s main (execvp, no shell), so the converter's exit
// status is the command's. Every check of the files themselves (SRC is a
// DCP directory or a torch.save file, DST is not clobbered, the version
// exists) is the converter's, in one place for both entry points.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "base/printable.h"
#include "cli/commands.h"

// Set by Makefile.am from configure: the interpreter the extension was built
// for (":" when built without Python), and where the package is in the build
// tree and where `make install` puts it.
#ifndef BATON_CONFIGURED_PYTHON
#error "BATON_CONFIGURED_PYTHON must be defined (Makefile.am)"
#endif

namespace baton::cli {
namespace {

namespace po = boost::program_options;

// What the interpreter runs: python -m baton.dcp's main, behind a guard
// that names a missing module (`import baton` needs numpy, the converter
// torch) with exit 2, where `-m` would print a traceback and exit 1.
// `-c` puts the working directory first on sys.path: taken off, so that a
// torch.py or numpy.py where the user stands is not imported.
constexpr const char* kBootstrap =
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "try:\n"
    "    from baton.dcp.__main__ import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('baton ckpt %s: %s cannot import %s (%s): install baton\\'s Python dependencies for it "
    "with `scripts/install-deps --with-torch` (then configure again), or name another interpreter with "
    "BATON_PYTHON\\n' % (sys.argv[3], sys.executable, e.name, e))\n"
    "    sys.exit(2)\n"
    "sys.exit(main(sys.argv[1:]))\n";

constexpr const char* kInstallHint =
    "install torch for it with `scripts/install-deps --with-torch` (then configure again), or name another "
    "interpreter with BATON_PYTHON";

int UsageError(const std::string& sub, const std::string& why, const po::options_description& desc) {
  std::cerr << "baton ckpt " << sub << ": " << why << "\n" << desc;
  return 2;
}

int Refuse(const std::string& sub, const std::string& why) {
  std::cerr << "baton ckpt " << sub << ": " << why << "\n";
  return 2;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The directory holding the package `baton`: the build tree's python/ when
// this binary is the build tree's (libtool runs cli/.libs/baton from
// there), else the install directories. BATON_PYTHONPATH overrides both.
std::vector<std::string> PackagePath() {
  if (const char* env = std::getenv("BATON_PYTHONPATH"); env != nullptr && *env != '\0') return {env};
  const std::string build = BATON_BUILD_TOP;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    // The build tree's binary exactly (a staged install may lie under the
    // build tree too: tests/install stages into test-results/).
    for (const char* built : {"/cli/baton", "/cli/.libs/baton", "/cli/.libs/lt-baton"}) {
      if (self == build + built) return {build + "/python"};
    }
  }
  std::vector<std::string> dirs = {BATON_INSTALL_PYEXECDIR};
  if (std::string(BATON_INSTALL_PYTHONDIR) != dirs[0]) dirs.push_back(BATON_INSTALL_PYTHONDIR);
  return dirs;
}

// Replaces this process with `python -c kBootstrap ARGS` (python -m
// baton.dcp ARGS, guarded); returns only on failure.
int ExecConverter(const std::string& sub, const std::vector<std::string>& args) {
  const char* env = std::getenv("BATON_PYTHON");
  const bool from_env = env != nullptr && *env != '\0';
  const std::string python = from_env ? env : BATON_CONFIGURED_PYTHON;
  if (python == ":" || python.empty()) {
    return Refuse(sub, "baton was configured without Python (no interpreter to read DCP or torch.save files): "
                       "configure with Python 3, pybind11 and torch (" + std::string(kInstallHint) + ")");
  }
  const std::string origin = from_env ? " (BATON_PYTHON)" : " (configure's PYTHON)";
  // A bare name (BATON_PYTHON=python3) is looked up in PATH by execvp.
  const bool bare = python.find('/') == std::string::npos;
  if (!bare && ::access(python.c_str(), X_OK) != 0) {
    return Refuse(sub, "the Python interpreter " + Printable(python) + origin + " cannot be run (" +
                           std::strerror(errno) + "): " + kInstallHint);
  }
  const std::vector<std::string> path = PackagePath();
  std::string pythonpath;
  bool found = false;
  for (const std::string& d : path) {
    pythonpath += (pythonpath.empty() ? "" : ":") + d;
    found = found || IsFile(d + "/baton/dcp/__main__.py");
  }
  if (!found) {
    return Refuse(sub, "baton's Python package (baton/dcp/__main__.py) is not in " + Printable(pythonpath) +
                           " (built or installed without the Python extension?); BATON_PYTHONPATH names another");
  }
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') pythonpath += std::string(":") + old;
  ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
  std::vector<std::string> all = {python, "-c", kBootstrap, "--prog", "baton ckpt"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(python.c_str(), argv.data());
  return Refuse(sub, "cannot run " + Printable(python) + origin + ": " + std::strerror(errno) + "; " + kInstallHint);
}

}  // namespace

int CkptConvertCommand(const std::string& sub, const std::vector<std::string>& args) {
  const bool is_import = sub == "import";
  std::string from, to, format = "dcp";
  int64_t step = -1;
  int keep = 0;
  bool force = false;
  po::options_description desc(
      is_import ? "usage: baton ckpt import SRC DIR [--step N] [--keep K]\n"
                  "  SRC: a DCP checkpoint directory (FileSystemWriter's, with .metadata) or a torch.save file;\n"
                  "  it becomes a new version of the baton checkpoint directory DIR. Options"
                : "usage: baton ckpt export DIR DST [--step N] [--format dcp|torch] [--force]\n"
                  "  The newest version of DIR, whoever wrote it (or step N's), becomes DST: a DCP\n"
                  "  checkpoint directory (dcp) or a torch.save file (torch). Options");
  desc.add_options()("help,h", "print this help")(
      "step", po::value(&step),
      is_import ? "the version's step (default: one past DIR's newest, 0 in an empty DIR)"
                : "export the newest version of this step (default: the newest version)");
  if (is_import) {
    desc.add_options()("keep", po::value(&keep),
                       "versions DIR keeps after the import, >= 1 (default: 3, as the Checkpointer keeps)");
  } else {
    desc.add_options()("format", po::value(&format), "dcp (a directory) or torch (one file); default dcp")(
        "force", po::bool_switch(&force), "replace an existing DST (a DCP directory or a file)");
  }
  po::options_description hidden;
  hidden.add_options()("from", po::value(&from))("to", po::value(&to));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description pos;
  pos.add("from", 1).add("to", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return UsageError(sub, e.what(), desc);
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  if (from.empty() || to.empty()) {
    return UsageError(sub, is_import ? "give SRC and DIR" : "give DIR and DST", desc);
  }
  std::vector<std::string> out = {sub};
  if (vm.count("step")) {
    if (step < 0) return UsageError(sub, "--step: invalid value '" + std::to_string(step) + "' (expected >= 0)", desc);
    out.insert(out.end(), {"--step", std::to_string(step)});
  }
  if (vm.count("keep")) {
    if (keep < 1) return UsageError(sub, "--keep: invalid value '" + std::to_string(keep) + "' (expected >= 1)", desc);
    out.insert(out.end(), {"--keep", std::to_string(keep)});
  }
  if (!is_import) {
    if (format != "dcp" && format != "torch") {
      return UsageError(sub, "--format: invalid value '" + Printable(format) + "' (expected dcp or torch)", desc);
    }
    out.insert(out.end(), {"--format", format});
    if (force) out.push_back("--force");
  }
  // The paths last, after "--": a path that begins with '-' stays a path.
  out.insert(out.end(), {"--", from, to});
  return ExecConverter(sub, out);
}

}  // namespace baton::cli
