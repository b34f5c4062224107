#include "train_state.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

namespace train {
namespace {

// 2: global batch and micro-batches (1 had a per-rank batch and a world
// size that had to match).
constexpr const char* kBlobHeader = "baton-train 2";

std::string Double17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The whole text, digits only (from_chars takes no sign, space or prefix).
bool ToU64(const std::string& s, uint64_t* v, int base = 10) {
  uint64_t x = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), x, base);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  *v = x;
  return true;
}

}  // namespace

baton::Status RunFacts::FromEnvironment(RunFacts* out) {
  RunFacts f;
  if (const char* job = std::getenv("SLURM_JOB_ID")) f.job = job;
  if (const char* r = std::getenv("SLURM_RESTART_COUNT"); r != nullptr && *r != '\0') {
    uint64_t v = 0;
    if (!ToU64(r, &v) || v > 1000000000)
      return baton::Status::InvalidArgument("train", std::string("SLURM_RESTART_COUNT='") + r + "' is not a count");
    f.restart = static_cast<int>(v);
  }
  *out = f;
  return baton::Status::OK();
}

std::string Blob::Encode() const {
  std::ostringstream o;
  o << kBlobHeader << "\n"
    << "epoch=" << cursor.epoch << "\noffset=" << cursor.offset << "\nseed=" << seed << "\ndata="
    << std::hex << data << std::dec << "\nhidden=" << hidden << "\nglobal_batch=" << global_batch
    << "\nmicro_batches=" << micro_batches << "\nreduce=" << reduce << "\nlr=" << Double17(lr)
    << "\nworld=" << world << "\njob=" << saved_by.job << "\nrestart=" << saved_by.restart << "\n";
  return o.str();
}

baton::Status Blob::Decode(const std::string& text, Blob* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kBlobHeader)
    return baton::Status::InvalidArgument(
        "train", line == "baton-train 1"
                     ? "the checkpoint was made by an older baton-train (a per-rank --batch, before micro-batches); "
                       "its run cannot be continued by this one"
                     : "the checkpoint's user blob is not baton-train's (first line '" + line + "')");
  std::map<std::string, std::string> kv;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos)
      return baton::Status::Corruption("train", "user blob: line '" + line + "' is not key=value");
    kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  Blob b;
  uint64_t v = 0;
  auto need = [&](const char* key, int base, uint64_t* dst) -> baton::Status {
    auto it = kv.find(key);
    if (it == kv.end() || !ToU64(it->second, dst, base))
      return baton::Status::Corruption("train", std::string("user blob: no valid ") + key);
    return baton::Status::OK();
  };
  BATON_RETURN_IF_ERROR(need("epoch", 10, &b.cursor.epoch));
  BATON_RETURN_IF_ERROR(need("offset", 10, &b.cursor.offset));
  BATON_RETURN_IF_ERROR(need("seed", 10, &b.seed));
  BATON_RETURN_IF_ERROR(need("data", 16, &b.data));
  BATON_RETURN_IF_ERROR(need("hidden", 10, &v));
  b.hidden = static_cast<uint32_t>(v);
  BATON_RETURN_IF_ERROR(need("global_batch", 10, &v));
  b.global_batch = static_cast<uint32_t>(v);
  BATON_RETURN_IF_ERROR(need("micro_batches", 10, &v));
  b.micro_batches = static_cast<uint32_t>(v);
  b.reduce = kv["reduce"];
  if (b.reduce != "ordered" && b.reduce != "ring")
    return baton::Status::Corruption("train", "user blob: reduce='" + b.reduce + "' is not ordered or ring");
  BATON_RETURN_IF_ERROR(need("world", 10, &v));
  b.world = static_cast<int>(v);
  BATON_RETURN_IF_ERROR(need("restart", 10, &v));
  b.saved_by.restart = static_cast<int>(v);
  b.saved_by.job = kv["job"];
  char* end = nullptr;
  b.lr = std::strtod(kv["lr"].c_str(), &end);
  if (kv["lr"].empty() || *end != '\0') return baton::Status::Corruption("train", "user blob: no valid lr");
  *out = b;
  return baton::Status::OK();
}

std::string Blob::Differences(const Blob& now) const {
  std::string d;
  auto add = [&](const std::string& what, const std::string& was, const std::string& is) {
    if (was == is) return;
    if (!d.empty()) d += ", ";
    d += what + " " + was + " (this run: " + is + ")";
  };
  add("--seed", std::to_string(seed), std::to_string(now.seed));
  add("--lr", Double17(lr), Double17(now.lr));
  add("--hidden", std::to_string(hidden), std::to_string(now.hidden));
  add("--global-batch", std::to_string(global_batch), std::to_string(now.global_batch));
  add("--micro-batches", std::to_string(micro_batches), std::to_string(now.micro_batches));
  add("--reduce", reduce, now.reduce);
  char a[17], b[17];
  std::snprintf(a, sizeof a, "%016" PRIx64, data);
  std::snprintf(b, sizeof b, "%016" PRIx64, now.data);
  add("data checksum", a, b);
  return d;
}

int RestartsWithoutProgress(const std::optional<Blob>& newest, const RunFacts& now) {
  // A version saved by restart K0 of this job: restarts K0+1 .. now found
  // it; K0+1 was progress (K0 had saved), the others were not.
  if (newest && newest->saved_by.job == now.job && newest->saved_by.restart <= now.restart)
    return std::max(0, now.restart - newest->saved_by.restart - 1);
  // Nothing of this job's saved: every restart so far came to nothing.
  return now.restart;
}

baton::Status TrainState::Create(baton::Runtime& rt, const std::string& dir, Mlp* model, std::vector<Rng>* dropout,
                                 Share share, uint32_t micro_batches, std::unique_ptr<TrainState>* out) {
  static_assert(sizeof(Rng::State) == 4 * sizeof(int64_t), "one row of rng holds a state");
  std::unique_ptr<TrainState> t(new TrainState());
  t->dropout_ = dropout;
  baton::CheckpointOptions co;
  co.dir = dir;
  BATON_RETURN_IF_ERROR(baton::Checkpointer::Create(rt, co, &t->ck_));
  std::vector<Tensor> arrays = model->params();
  for (Tensor& m : model->momenta()) arrays.push_back(m);
  for (Tensor& a : arrays)
    BATON_RETURN_IF_ERROR(t->ck_->RegisterReplicated(a.name, a.data->data(), baton::DType::kF32, a.shape));
  t->rng_rows_.assign(size_t{share.count} * 4, 0);
  BATON_RETURN_IF_ERROR(t->ck_->RegisterSharded("rng", t->rng_rows_.data(), baton::DType::kI64,
                                                {micro_batches, 4}, share.first, share.count));
  *out = std::move(t);
  return baton::Status::OK();
}

baton::Status TrainState::Restore(std::optional<int64_t>* step, Blob* blob, int from_level) {
  baton::RestoreOptions options;
  options.from_level = from_level;
  baton::RestoreResult result;
  BATON_RETURN_IF_ERROR(ck_->Restore(options, &result));
  *step = result.step;
  if (!*step) return baton::Status::OK();
  for (size_t q = 0; q < dropout_->size(); ++q) {
    Rng::State s;
    std::memcpy(s.data(), rng_rows_.data() + 4 * q, sizeof s);
    (*dropout_)[q].set_state(s);
  }
  return Blob::Decode(ck_->user_blob(), blob).Annotate("restoring step " + std::to_string(**step));
}

baton::Status TrainState::Save(int64_t step, const Blob& blob, bool async) {
  for (size_t q = 0; q < dropout_->size(); ++q)
    std::memcpy(rng_rows_.data() + 4 * q, (*dropout_)[q].state().data(), sizeof(Rng::State));
  BATON_RETURN_IF_ERROR(ck_->SetUserBlob(blob.Encode()));
  return async ? ck_->SaveAsync(step) : ck_->Save(step);
}

}  // namespace train
