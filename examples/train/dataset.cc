#include "dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "hash.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the data set file is little-endian and read by copying bytes"
#endif

namespace train {
namespace {

constexpr char kMagic[8] = {'B', 'T', 'N', 'D', 'A', 'T', 'A', '1'};
constexpr size_t kHeaderBytes = 64;
constexpr float kCentreScale = 0.1f;  // with unit noise: classes overlap at 512 features

template <typename T>
void Put(char* header, size_t off, T v) {
  std::memcpy(header + off, &v, sizeof v);
}
template <typename T>
T Get(const char* header, size_t off) {
  T v;
  std::memcpy(&v, header + off, sizeof v);
  return v;
}

std::string Errno() { return std::strerror(errno); }

baton::Status WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return baton::Status::IOError("train", "writing " + path + ": " + Errno());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return baton::Status::OK();
}

}  // namespace

baton::Status MakeDataset(const std::string& path, uint64_t samples, uint32_t features, uint32_t classes,
                          uint64_t seed) {
  Rng rng(seed, kStreamData);
  std::vector<float> centre(static_cast<size_t>(classes) * features);
  for (float& c : centre) c = kCentreScale * static_cast<float>(rng.Normal());
  std::vector<float> x(samples * features);
  std::vector<int32_t> y(samples);
  for (uint64_t i = 0; i < samples; ++i) {
    y[i] = static_cast<int32_t>(rng.Below(classes));
    const float* c = centre.data() + static_cast<size_t>(y[i]) * features;
    for (uint32_t f = 0; f < features; ++f) x[i * features + f] = c[f] + static_cast<float>(rng.Normal());
  }
  Hasher payload;
  payload.Update(x.data(), x.size() * sizeof(float));
  payload.Update(y.data(), y.size() * sizeof(int32_t));

  char header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, sizeof kMagic);
  Put<uint64_t>(header, 8, samples);
  Put<uint32_t>(header, 16, features);
  Put<uint32_t>(header, 20, classes);
  Put<uint64_t>(header, 24, seed);
  Put<uint64_t>(header, 32, payload.Digest());
  Put<uint64_t>(header, 40, Hash64(header, 40));

  // Atomic: a reader never sees half a file, a crash leaves the old one.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return baton::Status::IOError("train", "--make-data: cannot create " + tmp + ": " + Errno());
  baton::Status s = WriteAll(fd, header, sizeof header, tmp);
  if (s.ok()) s = WriteAll(fd, x.data(), x.size() * sizeof(float), tmp);
  if (s.ok()) s = WriteAll(fd, y.data(), y.size() * sizeof(int32_t), tmp);
  if (s.ok() && ::fsync(fd) != 0) s = baton::Status::IOError("train", "fsync " + tmp + ": " + Errno());
  if (::close(fd) != 0 && s.ok()) s = baton::Status::IOError("train", "close " + tmp + ": " + Errno());
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = baton::Status::IOError("train", "rename " + tmp + " to " + path + ": " + Errno());
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

baton::Status LoadDataset(const std::string& path, Dataset* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return baton::Status::InvalidArgument("train", "--data: cannot open '" + path + "': " + Errno());
  char header[kHeaderBytes];
  if (!in.read(header, sizeof header))
    return baton::Status::Corruption("train", "--data: '" + path + "' is shorter than its 64-byte header");
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0)
    return baton::Status::InvalidArgument("train", "--data: '" + path + "' is not a baton-train data set (no BTNDATA1)");
  if (Get<uint64_t>(header, 40) != Hash64(header, 40))
    return baton::Status::Corruption("train", "--data: '" + path + "': header checksum mismatch");
  Dataset d;
  d.samples = Get<uint64_t>(header, 8);
  d.features = Get<uint32_t>(header, 16);
  d.classes = Get<uint32_t>(header, 20);
  d.seed = Get<uint64_t>(header, 24);
  d.checksum = Get<uint64_t>(header, 32);
  if (d.samples == 0 || d.features == 0 || d.classes < 2 || d.samples > (uint64_t{1} << 32) || d.features > (1u << 16))
    return baton::Status::Corruption("train", "--data: '" + path + "': implausible shape in the header");
  struct stat st {};
  const uint64_t want = kHeaderBytes + d.samples * d.features * sizeof(float) + d.samples * sizeof(int32_t);
  if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != want)
    return baton::Status::Corruption("train", "--data: '" + path + "' has " + std::to_string(st.st_size) +
                                                  " bytes, its header says " + std::to_string(want));
  d.x.resize(d.samples * d.features);
  d.y.resize(d.samples);
  if (!in.read(reinterpret_cast<char*>(d.x.data()), static_cast<std::streamsize>(d.x.size() * sizeof(float))) ||
      !in.read(reinterpret_cast<char*>(d.y.data()), static_cast<std::streamsize>(d.y.size() * sizeof(int32_t))))
    return baton::Status::IOError("train", "--data: reading '" + path + "' failed");
  Hasher payload;
  payload.Update(d.x.data(), d.x.size() * sizeof(float));
  payload.Update(d.y.data(), d.y.size() * sizeof(int32_t));
  if (payload.Digest() != d.checksum)
    return baton::Status::Corruption("train", "--data: '" + path + "': payload checksum mismatch");
  for (uint64_t i = 0; i < d.samples; ++i)
    if (d.y[i] < 0 || static_cast<uint32_t>(d.y[i]) >= d.classes)
      return baton::Status::Corruption("train", "--data: '" + path + "': label " + std::to_string(d.y[i]) +
                                                    " of sample " + std::to_string(i) + " is not a class");
  *out = std::move(d);
  return baton::Status::OK();
}

Sampler::Sampler(const Dataset& data, uint64_t seed, uint32_t global_batch)
    : data_(data), seed_(seed), global_batch_(global_batch) {}

void Sampler::Shuffle(uint64_t epoch) {
  perm_.resize(data_.samples);
  for (uint64_t i = 0; i < data_.samples; ++i) perm_[i] = i;
  Rng rng(seed_, EpochStream(epoch));
  for (uint64_t i = data_.samples - 1; i > 0; --i) std::swap(perm_[i], perm_[rng.Below(i + 1)]);
  shuffled_epoch_ = epoch;
}

void Sampler::Next(Cursor* cursor, std::vector<uint64_t>* indices) {
  if (cursor->offset + global_batch_ > data_.samples) {
    ++cursor->epoch;
    cursor->offset = 0;
  }
  if (shuffled_epoch_ != cursor->epoch) Shuffle(cursor->epoch);
  indices->assign(perm_.begin() + static_cast<std::ptrdiff_t>(cursor->offset),
                  perm_.begin() + static_cast<std::ptrdiff_t>(cursor->offset + global_batch_));
  cursor->offset += global_batch_;
}

}  // namespace train
