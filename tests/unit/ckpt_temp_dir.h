// A fresh directory under $TMPDIR for one test, removed with everything in it
// (through the POSIX Env's RemoveTree) when the test ends.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ckpt/fs/env.h"

namespace baton::ckpt {

class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/baton-ckpt-test-XXXXXX";
    if (::mkdtemp(&tmpl[0]) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    Status s = fs::Env::Default()->RemoveTree(path_);
    if (!s.ok()) ADD_FAILURE() << s;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `bytes` into a new file through env.
inline Status WriteWholeFile(fs::Env* env, const std::string& path, const std::string& bytes, mode_t mode = 0644) {
  std::unique_ptr<fs::WritableFile> f;
  BATON_RETURN_IF_ERROR(env->NewWritableFile(path, mode, &f));
  BATON_RETURN_IF_ERROR(f->Append(bytes.data(), bytes.size()));
  BATON_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

}  // namespace baton::ckpt
