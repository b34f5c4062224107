// A two-layer perceptron trained with SGD and momentum: the model of
// baton-train. Plain loops on the CPU in a fixed order, so the same inputs
// give the same bits on every run; a GPU version would keep this interface
// (parameters, gradients, optimizer state as named tensors) and move the
// loops into kernels.
//
//   logits = dropout(relu(x W1 + b1)) W2 + b2,  loss = mean cross-entropy
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataset.h"
#include "rng.h"

namespace train {

// One named array of the model: a parameter, its gradient or its momentum.
struct Tensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float>* data;
};

class Mlp {
 public:
  Mlp(uint32_t inputs, uint32_t hidden, uint32_t classes);

  // Weights drawn from `seed` (Glorot uniform; biases 0), the same on every
  // rank; momentum 0.
  void Init(uint64_t seed);

  // Forward and backward over the samples `idx` of `data`: the gradients of
  // (the summed loss over them) / `divisor` replace the previous gradients,
  // so that summing the micro-batches of a global batch of `divisor`
  // samples gives the gradient of its mean loss. Dropout masks are drawn
  // from `dropout`. Returns the summed loss.
  double ForwardBackward(const Dataset& data, const std::vector<uint64_t>& idx, Rng* dropout, uint32_t divisor);

  // SGD with momentum on the (already averaged) gradients:
  //   m = momentum * m + g;  w -= lr * m
  void Update(float lr, float momentum);

  // In a fixed order, the same on every rank (the bucketing order, the
  // checkpoint's arrays, the checksum's bytes).
  std::vector<Tensor> params();
  std::vector<Tensor> grads();
  std::vector<Tensor> momenta();

  uint64_t num_params() const { return w1_.size() + b1_.size() + w2_.size() + b2_.size(); }

 private:
  uint32_t in_, hidden_, out_;
  std::vector<float> w1_, b1_, w2_, b2_;          // in x hidden, hidden, hidden x out, out
  std::vector<float> gw1_, gb1_, gw2_, gb2_;
  std::vector<float> mw1_, mb1_, mw2_, mb2_;
  std::vector<float> h_, dh_, p_;                 // batch x hidden (twice), batch x out
};

}  // namespace train
