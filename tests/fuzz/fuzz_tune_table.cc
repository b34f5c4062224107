// libFuzzer target: the tune table reader (mpi_runtime/mpi/tune_table.h),
// the file `baton tune` writes and algorithm auto reads. Any bytes give OK
// or InvalidArgument naming the source; never a crash or a hang. A table it
// accepts formats to text that parses to the same table, and every lookup
// in it answers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mpi_runtime/mpi/tune_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::mpi;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  TuneTable t;
  baton::Status s = ParseTuneTable(text, "fuzz.json", &t);
  if (!s.ok()) {
    if (s.message().find("fuzz.json") == std::string::npos) std::abort();  // the error names the file
    return 0;
  }
  TuneTable back;
  if (!ParseTuneTable(FormatTuneTable(t), "formatted", &back).ok() || back != t) std::abort();
  for (const auto& [key, sizes] : t) {
    for (const auto& [bytes, algo] : sizes) {
      if (LookupTuned(t, key, bytes) != algo) std::abort();
      (void)LookupTuned(t, key, bytes + 1);
      if (bytes > 0) (void)LookupTuned(t, key, bytes - 1);
    }
  }
  return 0;
}
