#include "mlp.h"

#include <algorithm>
#include <cmath>

#include "options.h"

namespace train {

Mlp::Mlp(uint32_t inputs, uint32_t hidden, uint32_t classes)
    : in_(inputs), hidden_(hidden), out_(classes),
      w1_(size_t{inputs} * hidden), b1_(hidden), w2_(size_t{hidden} * classes), b2_(classes),
      gw1_(w1_.size()), gb1_(b1_.size()), gw2_(w2_.size()), gb2_(b2_.size()),
      mw1_(w1_.size()), mb1_(b1_.size()), mw2_(w2_.size()), mb2_(b2_.size()) {}

void Mlp::Init(uint64_t seed) {
  Rng rng(seed, kStreamWeights);
  const float a1 = std::sqrt(6.0f / static_cast<float>(in_ + hidden_));
  const float a2 = std::sqrt(6.0f / static_cast<float>(hidden_ + out_));
  for (float& w : w1_) w = a1 * (2.0f * rng.Uniform() - 1.0f);
  for (float& w : w2_) w = a2 * (2.0f * rng.Uniform() - 1.0f);
  for (auto* v : {&b1_, &b2_, &mw1_, &mb1_, &mw2_, &mb2_}) std::fill(v->begin(), v->end(), 0.0f);
}

double Mlp::ForwardBackward(const Dataset& data, const std::vector<uint64_t>& idx, Rng* dropout, uint32_t divisor) {
  const size_t n = idx.size(), H = hidden_, C = out_;
  h_.assign(n * H, 0.0f);
  dh_.assign(n * H, 0.0f);
  p_.assign(n * C, 0.0f);
  const float keep_scale = 1.0f / (1.0f - kDropout);

  // Hidden layer: h = dropout(relu(x W1 + b1)). Inverted dropout; a dropped
  // unit keeps 0 in h and gets no gradient.
  for (size_t b = 0; b < n; ++b) {
    float* h = h_.data() + b * H;
    std::copy(b1_.begin(), b1_.end(), h);
    const float* x = data.row(idx[b]);
    for (uint32_t i = 0; i < in_; ++i) {
      const float xi = x[i];
      const float* w = w1_.data() + size_t{i} * H;
      for (size_t j = 0; j < H; ++j) h[j] += xi * w[j];
    }
    float* mask = dh_.data() + b * H;  // holds the mask until the backward pass
    for (size_t j = 0; j < H; ++j) {
      const bool kept = dropout->Uniform() >= kDropout;
      mask[j] = (kept && h[j] > 0.0f) ? keep_scale : 0.0f;
      h[j] *= mask[j];
    }
  }

  // Output layer and softmax cross-entropy; p becomes dloss/dlogits.
  double loss = 0;
  for (size_t b = 0; b < n; ++b) {
    float* p = p_.data() + b * C;
    std::copy(b2_.begin(), b2_.end(), p);
    const float* h = h_.data() + b * H;
    for (size_t j = 0; j < H; ++j) {
      const float hj = h[j];
      if (hj == 0.0f) continue;
      const float* w = w2_.data() + j * C;
      for (size_t c = 0; c < C; ++c) p[c] += hj * w[c];
    }
    const float top = *std::max_element(p, p + C);
    float sum = 0;
    for (size_t c = 0; c < C; ++c) sum += (p[c] = std::exp(p[c] - top));
    const auto label = static_cast<size_t>(data.y[idx[b]]);
    loss -= std::log(static_cast<double>(p[label] / sum));
    for (size_t c = 0; c < C; ++c) p[c] = (p[c] / sum - (c == label ? 1.0f : 0.0f)) / static_cast<float>(divisor);
  }

  // Backward.
  std::fill(gw1_.begin(), gw1_.end(), 0.0f);
  std::fill(gb1_.begin(), gb1_.end(), 0.0f);
  std::fill(gw2_.begin(), gw2_.end(), 0.0f);
  std::fill(gb2_.begin(), gb2_.end(), 0.0f);
  for (size_t b = 0; b < n; ++b) {
    const float* p = p_.data() + b * C;
    const float* h = h_.data() + b * H;
    float* dh = dh_.data() + b * H;  // the mask, turned into the gradient of h's pre-activation
    for (size_t c = 0; c < C; ++c) gb2_[c] += p[c];
    for (size_t j = 0; j < H; ++j) {
      const float* w = w2_.data() + j * C;
      float* gw = gw2_.data() + j * C;
      float g = 0;
      for (size_t c = 0; c < C; ++c) {
        gw[c] += h[j] * p[c];
        g += w[c] * p[c];
      }
      dh[j] *= g;
      gb1_[j] += dh[j];
    }
    const float* x = data.row(idx[b]);
    for (uint32_t i = 0; i < in_; ++i) {
      const float xi = x[i];
      float* gw = gw1_.data() + size_t{i} * H;
      for (size_t j = 0; j < H; ++j) gw[j] += xi * dh[j];
    }
  }
  return loss;
}

void Mlp::Update(float lr, float momentum) {
  auto step = [&](std::vector<float>& w, std::vector<float>& m, const std::vector<float>& g) {
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = momentum * m[i] + g[i];
      w[i] -= lr * m[i];
    }
  };
  step(w1_, mw1_, gw1_);
  step(b1_, mb1_, gb1_);
  step(w2_, mw2_, gw2_);
  step(b2_, mb2_, gb2_);
}

std::vector<Tensor> Mlp::params() {
  return {{"w1", {in_, hidden_}, &w1_}, {"b1", {hidden_}, &b1_}, {"w2", {hidden_, out_}, &w2_}, {"b2", {out_}, &b2_}};
}
std::vector<Tensor> Mlp::grads() {
  return {{"grad.w1", {in_, hidden_}, &gw1_}, {"grad.b1", {hidden_}, &gb1_},
          {"grad.w2", {hidden_, out_}, &gw2_}, {"grad.b2", {out_}, &gb2_}};
}
std::vector<Tensor> Mlp::momenta() {
  return {{"momentum.w1", {in_, hidden_}, &mw1_}, {"momentum.b1", {hidden_}, &mb1_},
          {"momentum.w2", {hidden_, out_}, &mw2_}, {"momentum.b2", {out_}, &mb2_}};
}

}  // namespace train
