// libFuzzer target: the checkpoint manifest reader (ckpt/manifest.h). Any
// bytes give OK or a Status (Corruption, or Unavailable for a newer format);
// never a crash, a hang or an allocation beyond what the text can justify.
// A manifest it accepts is written back and must read back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ckpt/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::ckpt::Manifest;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Manifest m;
  baton::Status s = baton::ckpt::ParseManifestJson(text, &m);
  if (!s.ok()) {
    if (s.message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  std::string again;
  if (!baton::ckpt::WriteManifestJson(m, &again).ok()) return 0;  // the writer may refuse what it cannot write
  Manifest back;
  if (!baton::ckpt::ParseManifestJson(again, &back).ok()) std::abort();  // what we write, we read
  std::string third;
  if (!baton::ckpt::WriteManifestJson(back, &third).ok() || third != again) std::abort();
  return 0;
}
