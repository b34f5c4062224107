// ckpt/state_dict_tree: the whole tensors `baton ckpt inspect` shows of a state-dict version.
#include "ckpt/state_dict_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace baton::ckpt {
namespace {

TEST(StateDictTree, TensorsByPathWithTheirBoxes) {
  // As Checkpointer writes it: an object's state in place of the object, a $dict with int keys, a DTensor.
  const std::string blob = R"json({"format": "baton.state_dict", "version": 1, "tree": {
    "model": {"$object": "Linear", "module": true, "state": {
      "weight": {"$array": "model:weight", "lib": "torch", "dtype": "float32", "shape": [4, 3], "sharded": false},
      "d": {"$array": "model:d", "lib": "torch", "dtype": "bfloat16", "shape": [4], "sharded": true,
            "dtensor": {"placements": ["S(0)"], "mesh": [2],
                        "chunks": [["model:d~@0", [0], [2]], ["model:d~@2", [2], [2]]]}}}},
    "optim": {"state": {"$dict": [[0, {"step": {"$array": "optim:state:0:step", "lib": "torch",
                                                  "dtype": "float32", "shape": [], "sharded": false}}]],
                        "ordered": false}},
    "epoch": 3, "lrs": [0.1, {"$float": "nan"}], "rng": {"$per_rank": "rng"}}})json";
  bool is = false;
  std::vector<StateDictTensor> t;
  ASSERT_TRUE(StateDictTensors(blob, &is, &t).ok());
  ASSERT_TRUE(is);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].path, "model.weight");
  EXPECT_EQ(t[0].shape, (std::vector<uint64_t>{4, 3}));
  EXPECT_EQ(t[0].arrays, (std::vector<std::string>{"model:weight"}));
  EXPECT_EQ(t[1].path, "model.d");
  EXPECT_EQ(t[1].dtype, "bfloat16");
  EXPECT_EQ(t[1].arrays, (std::vector<std::string>{"model:d~@0", "model:d~@2"}));
  EXPECT_EQ(t[2].path, "optim.state.0.step");
  EXPECT_TRUE(t[2].shape.empty());
}

TEST(StateDictTree, AnotherBlobIsNotAStateDict) {
  for (const std::string blob : {"", "not json", "[1, 2]", R"({"format": "mine"})"}) {
    bool is = true;
    std::vector<StateDictTensor> t;
    EXPECT_TRUE(StateDictTensors(blob, &is, &t).ok()) << blob;
    EXPECT_FALSE(is) << blob;
    EXPECT_TRUE(t.empty());
  }
}

TEST(StateDictTree, AMalformedTreeIsAnErrorNamingThePath) {
  bool is = false;
  std::vector<StateDictTensor> t;
  Status s = StateDictTensors(R"({"format": "baton.state_dict", "tree": {"a": {"b": {"$array": 7}}}})", &is, &t);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'a.b'"), std::string::npos) << s.message();
  // A forged depth stops at the bound instead of the stack.
  std::string deep = R"({"format": "baton.state_dict", "tree": )";
  for (int i = 0; i < 10000; ++i) deep += "[";
  for (int i = 0; i < 10000; ++i) deep += "]";
  deep += "}";
  s = StateDictTensors(deep, &is, &t);
  EXPECT_TRUE(s.ok() || s.code() == Code::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace baton::ckpt
