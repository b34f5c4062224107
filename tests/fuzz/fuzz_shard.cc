// libFuzzer target: the shard reader's checks (ckpt/hdf5/shard_reader.h,
// ckpt/verify.h), which stand between a hostile checkpoint and HDF5: the
// file's name, size and metadata checksum before HDF5 opens it, and each
// dataset's type, dims, layout and extent before a byte is read or
// allocated. Input: one mode byte, the manifest's JSON, a NUL, the shard's
// bytes. Mode bit 0 clear: the shard bytes are the file as given (a damaged
// file against a manifest). Set: the file is the valid shard of the seed
// (tests/fuzz/shard/valid.h5, written by baton) and the manifest's size and
// metadata checksum are recomputed for it, so a fuzzed manifest (offsets,
// rows, shapes, dtypes, chunks) reaches the dataset checks (format 1: type,
// dims, layout and extent through HDF5; format 2: the extent, the rest being
// under the recomputed checksum) while HDF5 only ever parses bytes baton
// wrote. Any input gives a clean Status or a list
// of failures; never a crash, a hang, or an allocation the file cannot
// justify.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"
#include "ckpt/metadata_checksum.h"
#include "ckpt/verify.h"

#ifndef BATON_FUZZ_SHARD
#define BATON_FUZZ_SHARD "tests/fuzz/shard/valid.h5"
#endif

namespace {

std::string g_dir;          // this process's version directory
std::string g_valid_shard;  // the valid shard's bytes

bool WriteAll(const std::string& path, const char* data, size_t n) {
  unlink(path.c_str());
  std::ofstream f(path, std::ios::binary);
  f.write(data, static_cast<std::streamsize>(n));
  return static_cast<bool>(f);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* shard = std::getenv("BATON_FUZZ_SHARD");
  std::ifstream in(shard ? shard : BATON_FUZZ_SHARD, std::ios::binary);
  g_valid_shard.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (g_valid_shard.empty()) {
    std::fprintf(stderr, "fuzz_shard: cannot read the valid shard %s (BATON_FUZZ_SHARD)\n",
                 shard ? shard : BATON_FUZZ_SHARD);
    std::exit(2);
  }
  char tmpl[] = "/tmp/baton-fuzz-shard.XXXXXX";
  if (!mkdtemp(tmpl)) std::exit(2);
  g_dir = tmpl;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::ckpt;
  if (size < 1) return 0;
  const bool valid_file = data[0] & 1;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string json = rest.substr(0, nul);
  const std::string file_bytes = nul == std::string::npos ? std::string() : rest.substr(nul + 1);

  Manifest m;
  if (!ParseManifestJson(json, &m).ok()) return 0;
  // Every shard the manifest names is this one file; names that are not
  // plain file names are ResolveInside's to refuse, and nothing is written.
  const std::string& bytes = valid_file ? g_valid_shard : file_bytes;
  for (ShardMeta& shard : m.shards) {
    if (!IsPlainFileName(shard.file)) continue;
    const std::string path = g_dir + "/" + shard.file;
    if (!WriteAll(path, bytes.data(), bytes.size())) continue;
    if (valid_file) {
      shard.bytes = bytes.size();
      std::vector<std::pair<uint64_t, uint64_t>> extents;
      for (const DatasetMeta& ds : shard.datasets) {
        if (ds.array >= m.arrays.size()) continue;
        const uint64_t len = ds.rows * m.arrays[ds.array].row_bytes();  // as ShardReader::Open computes them
        if (len > 0) extents.emplace_back(ds.offset, ds.offset + len);
      }
      uint64_t h = 0;
      if (HashOutsideExtents(baton::ckpt::fs::Env::Default(), path, bytes.size(), extents, &h).ok())
        shard.meta_xxh3 = h;
    }
  }
  std::vector<std::string> failures;
  uint64_t checked = 0;
  baton::Status s = VerifyVersion(baton::ckpt::fs::Env::Default(), g_dir, m, &failures, &checked);
  if (checked > m.total_bytes()) std::abort();  // never more than the manifest holds
  for (const ShardMeta& shard : m.shards)
    if (IsPlainFileName(shard.file)) unlink((g_dir + "/" + shard.file).c_str());
  (void)s;
  return 0;
}
