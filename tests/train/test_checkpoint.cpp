// Checkpoint integrity: CRC32 against the standard check value, truncated/corrupt newest file
// falls back to the previous one, only the newest K are kept, RNG state round-trips.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "tiny_run.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

TEST(Checkpoint, Crc32CheckValue) {
  const fs::path f = test::fresh_dir("crc") / "x.txt";
  std::ofstream(f) << "123456789";
  EXPECT_EQ(file_crc32(f), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
}

TEST(Checkpoint, CorruptNewestFallsBackToPrevious) {
  const fs::path run = test::fresh_dir("ckpt_fallback");
  torch::nn::Linear net(3, 2);
  TrainState s;
  for (int64_t step : {10, 20, 30}) {
    s.step = step;
    save_checkpoint(run, *net, nullptr, s, "cfg", /*keep_last=*/2);
  }
  EXPECT_FALSE(fs::exists(run / "checkpoints/step_00000010.pt"));  // keep_last = 2
  EXPECT_FALSE(fs::exists(run / "checkpoints/step_00000010.pt.crc32"));
  ASSERT_EQ(latest_checkpoint(run)->filename(), "step_00000030.pt");

  const fs::path newest = run / "checkpoints/step_00000030.pt";
  fs::resize_file(newest, fs::file_size(newest) / 2);  // a crash mid-copy, a full disk
  std::string why;
  EXPECT_FALSE(verify_checkpoint(newest, &why));
  EXPECT_NE(why.find("checksum mismatch"), std::string::npos) << why;
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(latest_checkpoint(run)->filename(), "step_00000020.pt");
  EXPECT_THROW(load_checkpoint(newest, *net, nullptr), UserError);

  // Same size, one flipped byte: caught by the CRC, not only by the size.
  const fs::path middle = run / "checkpoints/step_00000020.pt";
  {
    std::fstream f(middle, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c;
    f.get(c);
    f.seekp(100);
    f.put(static_cast<char>(c ^ 0x5A));
  }
  EXPECT_FALSE(verify_checkpoint(middle));
  EXPECT_FALSE(latest_checkpoint(run).has_value());
}

TEST(Checkpoint, RestoresModelOptimizerStepCursorAndRng) {
  const fs::path run = test::fresh_dir("ckpt_roundtrip");
  torch::manual_seed(11);
  torch::nn::Linear net(3, 2);
  torch::optim::AdamW opt(net->parameters());
  net->forward(torch::randn({4, 3})).sum().backward();
  opt.step();
  TrainState s;
  s.step = 5, s.cursor.epoch = 2, s.cursor.position = 17, s.tokens_seen = 999, s.nonfinite_total = 1;
  s.optimizer_name = "adamw";
  const auto file = save_checkpoint(run, *net, &opt, s, "yaml text");
  const auto expected_draw = torch::rand({3});  // the next draw after the save

  torch::manual_seed(999);
  torch::nn::Linear other(3, 2);
  torch::optim::AdamW opt2(other->parameters());
  const auto c = load_checkpoint(file, *other, &opt2);
  EXPECT_TRUE(torch::equal(other->weight, net->weight));
  EXPECT_EQ(c.state.step, 5);
  EXPECT_EQ(c.state.cursor.epoch, 2);
  EXPECT_EQ(c.state.cursor.position, 17);
  EXPECT_EQ(c.state.tokens_seen, 999);
  EXPECT_EQ(c.state.nonfinite_total, 1);
  EXPECT_EQ(c.state.optimizer_name, "adamw");
  EXPECT_EQ(c.config_yaml, "yaml text");
  EXPECT_TRUE(torch::equal(torch::rand({3}), expected_draw));  // CPU generator restored
  EXPECT_FALSE(c.version.empty());
}

}  // namespace
}  // namespace rpe
