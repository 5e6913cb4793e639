// Checkpoint integrity: CRC-32 against zlib's values and a bit-by-bit reference, the checksum
// embedded in the file (the zip comment) and verified on every load, any flipped byte refused,
// old files with a .crc32 sidecar still accepted, a file with neither refused unless opted in,
// a truncated/corrupt newest file skipped, a failed write (file-size limit) leaving the previous
// checkpoint and no temporary file, and the round trip of model, optimizer, counters and RNG.
#include <gtest/gtest.h>

#include <cerrno>
#include <system_error>
#include <sys/resource.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "tiny_run.h"
#include "toy_engine.h"
#include "dist/data_parallel.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"
#include "util/atomic_writer.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

// The textbook bit-by-bit CRC-32 (reflected polynomial 0xEDB88320), independent of the tables.
uint32_t reference_crc(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::string read_bytes(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& f, const std::string& bytes) {
  std::ofstream out(f, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void flip_byte(const fs::path& f, size_t offset) {
  std::string bytes = read_bytes(f);
  bytes.at(offset) = static_cast<char>(bytes[offset] ^ 0x5A);
  spit(f, bytes);
}

// A checkpoint in the format written before the checksum moved into the file: no zip comment,
// a sidecar with the CRC-32 and size of the whole file.
void convert_to_sidecar_format(const fs::path& f) {
  std::string bytes = read_bytes(f);
  bytes.resize(bytes.size() - 50);  // drop the comment
  bytes[bytes.size() - 2] = 0;      // and announce none in the zip end record
  bytes[bytes.size() - 1] = 0;
  spit(f, bytes);
  char line[64];
  std::snprintf(line, sizeof line, "crc32 %08x size %zu\n", reference_crc(bytes), bytes.size());
  spit(f.string() + ".crc32", line);
}

TEST(Checkpoint, Crc32MatchesZlibAndTheBitwiseDefinition) {
  const fs::path f = test::fresh_dir("crc") / "x.txt";
  std::ofstream(f) << "123456789";
  EXPECT_EQ(file_crc32(f), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  std::string d;
  for (int i = 0; i < 1000; ++i) d.push_back(static_cast<char>((i * 7 + 3) % 256));
  // zlib.crc32(d[:n]) from Python, lengths around the 8-byte step.
  const std::pair<size_t, uint32_t> expected[] = {{0, 0x00000000u},    {1, 0x4b0bbe37u},   {7, 0x54491cdbu},
                                                  {8, 0xe2e35978u},    {9, 0x3d351cfeu},   {15, 0x7c619edcu},
                                                  {16, 0x191f3d9fu},   {17, 0x7ba75ee3u},  {999, 0x04fe75ecu},
                                                  {1000, 0x17bc2a46u}};
  for (const auto& [n, crc] : expected) {
    EXPECT_EQ(crc32_update(0, d.data(), n), crc) << n;
    EXPECT_EQ(reference_crc(d.substr(0, n)), crc) << n;
  }
  for (size_t cut = 0; cut <= 24; ++cut)  // chaining, at every alignment
    EXPECT_EQ(crc32_update(crc32_update(0, d.data(), cut), d.data() + cut, d.size() - cut), 0x17bc2a46u) << cut;
}

TEST(Checkpoint, ChecksumIsTheZipCommentOfTheFile) {
  const fs::path run = test::fresh_dir("ckpt_embedded");
  torch::manual_seed(3);
  torch::nn::Linear net(5, 4);
  TrainState s;
  s.step = 7;
  const fs::path file = save_checkpoint(run, *net, nullptr, s, "cfg");
  EXPECT_FALSE(fs::exists(file.string() + ".crc32"));  // no sidecar any more
  EXPECT_EQ(read_bytes(run / "checkpoints" / "latest"), "step_00000007.pt\n");
  const std::string bytes = read_bytes(file);
  ASSERT_GT(bytes.size(), 72u);
  const size_t body = bytes.size() - 50;
  EXPECT_EQ(bytes.substr(body - 22, 4), std::string("PK\x05\x06", 4));  // the zip end record...
  EXPECT_EQ(static_cast<unsigned char>(bytes[body - 2]), 50);             // ...announces the comment
  EXPECT_EQ(bytes[body - 1], 0);
  char expected[64];
  std::snprintf(expected, sizeof expected, "rpe-train crc32 %08x size %020zu", reference_crc(bytes.substr(0, body)),
                body);
  EXPECT_EQ(bytes.substr(body), expected);
  std::string why;
  EXPECT_TRUE(verify_checkpoint(file, &why)) << why;
  torch::nn::Linear other(5, 4);
  EXPECT_EQ(load_checkpoint(file, *other, nullptr).state.step, 7);  // still a LibTorch archive
  EXPECT_TRUE(torch::equal(other->weight, net->weight));
}

TEST(Checkpoint, AFlippedByteAnywhereIsRefusedOnLoad) {
  const fs::path dir = test::fresh_dir("ckpt_flip");
  torch::nn::Linear net(5, 4);
  const fs::path good = dir / "good.pt";
  write_checkpoint(good, *net, nullptr, nullptr, "cfg");
  const size_t size = fs::file_size(good);
  // Start, zip headers, tensor data, the zip end record, inside the checksum text, last byte.
  for (size_t offset : {size_t{0}, size_t{40}, size / 2, size - 60, size - 30, size - 1}) {
    const fs::path bad = dir / ("bad_" + std::to_string(offset) + ".pt");
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    flip_byte(bad, offset);
    std::string why;
    EXPECT_FALSE(verify_checkpoint(bad, &why)) << offset;
    torch::nn::Linear target(5, 4);
    try {
      load_checkpoint(bad, *target, nullptr);
      ADD_FAILURE() << "loaded a checkpoint with byte " << offset << " flipped";
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(bad.string() + ": ", 0), 0u) << e.what();
    }
    EXPECT_THROW(read_checkpoint_config(bad), UserError) << offset;
  }
}

// Checkpoints of `model` at `steps`, in order, keeping the newest keep_last.
void save_steps(const fs::path& run, torch::nn::Module& model, std::initializer_list<int64_t> steps, int64_t keep_last) {
  TrainState s;
  for (int64_t step : steps) {
    s.step = step;
    save_checkpoint(run, model, nullptr, s, "cfg", keep_last);
  }
}

TEST(Checkpoint, CorruptNewestFallsBackToPrevious) {
  const fs::path run = test::fresh_dir("ckpt_fallback");
  torch::nn::Linear net(3, 2);
  save_steps(run, *net, {10, 20, 30}, /*keep_last=*/2);
  EXPECT_FALSE(fs::exists(run / "checkpoints/step_00000010.pt"));  // keep_last = 2
  ASSERT_EQ(latest_checkpoint(run)->filename(), "step_00000030.pt");

  const fs::path newest = run / "checkpoints/step_00000030.pt";
  fs::resize_file(newest, fs::file_size(newest) / 2);  // a crash mid-copy, a full disk
  std::string why;
  EXPECT_FALSE(verify_checkpoint(newest, &why));
  EXPECT_NE(why.find("no checksum"), std::string::npos) << why;
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(latest_checkpoint(run)->filename(), "step_00000020.pt");
  EXPECT_THROW(load_checkpoint(newest, *net, nullptr), UserError);

  // Same size, one flipped byte: caught by the CRC, not only by the size.
  const fs::path middle = run / "checkpoints/step_00000020.pt";
  flip_byte(middle, 100);
  EXPECT_FALSE(verify_checkpoint(middle, &why));
  EXPECT_NE(why.find("checksum mismatch"), std::string::npos) << why;
  EXPECT_FALSE(latest_checkpoint(run).has_value());
}

// Resumed from step 6 because step 10 failed its checksum, the run saves step 8: rotation
// keeps the newest of the steps up to 8 (the file just written among them), moves step 10
// out of the way instead of counting it, and removes what a killed write left behind.
TEST(Checkpoint, RotationNeverCountsAnAbandonedNewerFileAndClearsDeadTempFiles) {
  const fs::path run = test::fresh_dir("ckpt_rotation");
  torch::nn::Linear net(3, 2);
  save_steps(run, *net, {2, 4, 6}, /*keep_last=*/1);
  TrainState s;
  const fs::path dir = run / "checkpoints";
  fs::copy_file(dir / "step_00000006.pt", dir / "step_00000010.pt");
  flip_byte(dir / "step_00000010.pt", 100);
  ASSERT_EQ(latest_checkpoint(run)->filename(), "step_00000006.pt");
  std::ofstream(dir / "step_00000012.pt.tmp.999999") << "half a checkpoint";  // a write killed mid-way
  std::ofstream(dir / "latest.tmp.999999") << "step_0000";                     // and one of the pointer
  s.step = 8;
  save_checkpoint(run, *net, nullptr, s, "cfg", /*keep_last=*/1);
  EXPECT_TRUE(fs::exists(dir / "step_00000008.pt"));
  EXPECT_FALSE(fs::exists(dir / "step_00000006.pt"));  // keep_last 1
  EXPECT_FALSE(fs::exists(dir / "step_00000010.pt"));
  EXPECT_TRUE(fs::exists(dir / "step_00000010.pt.superseded"));
  EXPECT_FALSE(fs::exists(dir / "step_00000012.pt.tmp.999999"));
  EXPECT_FALSE(fs::exists(dir / "latest.tmp.999999"));
  EXPECT_EQ(latest_checkpoint(run)->filename(), "step_00000008.pt");
}

TEST(Checkpoint, OldFilesVerifyAgainstTheirSidecarAndBareFilesNeedTheOptIn) {
  const fs::path dir = test::fresh_dir("ckpt_sidecar");
  torch::manual_seed(5);
  torch::nn::Linear net(4, 3);
  const fs::path file = dir / "old.pt";
  write_checkpoint(file, *net, nullptr, nullptr, "cfg");
  convert_to_sidecar_format(file);
  std::string why;
  EXPECT_TRUE(verify_checkpoint(file, &why)) << why;
  torch::nn::Linear other(4, 3);
  load_checkpoint(file, *other, nullptr);
  EXPECT_TRUE(torch::equal(other->weight, net->weight));

  const std::string original = read_bytes(file);
  flip_byte(file, original.size() / 2);
  EXPECT_FALSE(verify_checkpoint(file, &why));
  EXPECT_NE(why.find("checksum mismatch"), std::string::npos) << why;
  spit(file, original);

  fs::remove(file.string() + ".crc32");  // neither an embedded checksum nor a sidecar
  EXPECT_FALSE(verify_checkpoint(file, &why));
  EXPECT_NE(why.find("no checksum"), std::string::npos) << why;
  EXPECT_NE(why.find("RPE_TRAIN_ALLOW_UNCHECKED=1"), std::string::npos) << why;
  EXPECT_THROW(load_checkpoint(file, *other, nullptr), UserError);
  ::setenv("RPE_TRAIN_ALLOW_UNCHECKED", "1", 1);
  EXPECT_TRUE(verify_checkpoint(file));
  EXPECT_NO_THROW(load_checkpoint(file, *other, nullptr));
  ::unsetenv("RPE_TRAIN_ALLOW_UNCHECKED");
}

// RLIMIT_FSIZE with SIGXFSZ ignored makes write() fail with EFBIG past the limit: a full disk
// simulated without root (the ENOSPC message itself is checked by test_checkpoint_cli.sh).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limited = previous_;
    limited.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST(Checkpoint, AFailedWriteNamesTheFileAndKeepsThePreviousCheckpoint) {
  const fs::path run = test::fresh_dir("ckpt_full");
  torch::nn::Linear net(128, 128);  // 64 KiB of weights
  TrainState s;
  s.step = 1;
  const fs::path first = save_checkpoint(run, *net, nullptr, s, "cfg");
  s.step = 2;
  const fs::path second = run / "checkpoints/step_00000002.pt";
  try {
    FileSizeLimit limit(16 * 1024);
    save_checkpoint(run, *net, nullptr, s, "cfg");
    ADD_FAILURE() << "the write past the file-size limit succeeded";
  } catch (const std::system_error& e) {  // an environment failure: main() exits 1
    EXPECT_EQ(e.code().value(), EFBIG);
    EXPECT_EQ(std::string(e.what()), "cannot write " + second.string() + ": File too large");
  }
  EXPECT_FALSE(fs::exists(second));
  for (const auto& e : fs::directory_iterator(run / "checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_EQ(read_bytes(run / "checkpoints/latest"), "step_00000001.pt\n");
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(*latest_checkpoint(run), first);
}

// metrics.jsonl and results.jsonl: a line that does not fit (a full disk) is cut back off and
// reported as the machine's failure (exit 1, like a checkpoint's); the file keeps whole lines:
// a line torn by a crash (the last, no newline) is cut off before the next one is appended.
TEST(Checkpoint, AnAppendedLineIsWholeOrAbsent) {
  const fs::path file = test::fresh_dir("append") / "results.jsonl";
  append_line_synced(file, std::string(100, 'a'));
  try {
    FileSizeLimit limit(150);
    append_line_synced(file, std::string(100, 'b'));
    ADD_FAILURE() << "the append past the file-size limit succeeded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EFBIG);
  }
  EXPECT_EQ(read_bytes(file), std::string(100, 'a') + "\n");
  std::ofstream(file, std::ios::app) << "{\"torn";  // what a kill mid-write leaves
  append_line_synced(file, "next");
  EXPECT_EQ(read_bytes(file), std::string(100, 'a') + "\nnext\n");
  // A torn first line (no newline anywhere) and one longer than the backward scan's 4 KiB chunk.
  for (const size_t torn : {size_t{5}, size_t{10000}}) {
    std::ofstream(file, std::ios::trunc) << std::string(torn, 'x');
    append_line_synced(file, "only");
    EXPECT_EQ(read_bytes(file), "only\n") << torn;
    std::ofstream(file, std::ios::app) << "kept\n" << std::string(torn, 'y');
    append_line_synced(file, "last");
    EXPECT_EQ(read_bytes(file), "only\nkept\nlast\n") << torn;
  }
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
  s.world_sizes = {{0, 2}, {3, 1}};  // 3 steps on 2 ranks, then one process
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
  EXPECT_EQ(c.state.world_sizes, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {3, 1}}));
  EXPECT_EQ(c.config_yaml, "yaml text");
  EXPECT_TRUE(torch::equal(torch::rand({3}), expected_draw));  // CPU generator restored
  EXPECT_FALSE(c.version.empty());
  EXPECT_FALSE(c.state.rng_device_ranks.defined());  // a single-process run has no per-rank streams
}

// A multi-GPU run's per-rank device streams travel with the checkpoint, and each rank of the same
// world size takes its own row back; another world size, or a CPU run, keeps rank 0's.
TEST(Checkpoint, KeepsEveryRanksDeviceStream) {
  const fs::path run = test::fresh_dir("ckpt_rank_rng");
  torch::nn::Linear net(3, 2);
  torch::optim::AdamW opt(net->parameters());
  TrainState s;
  s.step = 3;
  dist::DataParallel one;  // a single process: its own row alone
  const auto row = torch::arange(16, torch::kUInt8);
  const auto gathered = every_rank_row(one, row);
  ASSERT_EQ(gathered.sizes(), (std::vector<int64_t>{1, 16}));
  EXPECT_TRUE(torch::equal(gathered[0], row));
  s.rng_device_ranks = torch::stack({row, row.flip(0)});  // as two ranks would have gathered
  const auto c = load_checkpoint(save_checkpoint(run, *net, &opt, s, "yaml"), *net, &opt);
  ASSERT_TRUE(c.state.rng_device_ranks.defined());
  EXPECT_TRUE(torch::equal(c.state.rng_device_ranks, s.rng_device_ranks));
  torch::manual_seed(5);  // on the CPU nothing is set: the CPU's stream goes on
  const auto before = torch::rand({2});
  torch::manual_seed(5);
  restore_rank_device_rng(c.state, 1, 2, torch::kCPU);
  EXPECT_TRUE(torch::equal(torch::rand({2}), before));
}

// A multi-GPU run resumed as one process writes no per-rank streams: the rows it resumed with are
// streams it no longer draws from, and a later resume on that many GPUs would put them back.
TEST(Checkpoint, OneProcessDropsTheRanksStreamsItResumedWith) {
  const fs::path run = test::fresh_dir("ckpt_rank_rng_dropped");
  test::ToyRun r(test::toy_options(2, 1), {}, {}, run);
  TrainState s;
  s.rng_device_ranks = torch::stack({torch::arange(16, torch::kUInt8), torch::arange(16, torch::kUInt8).flip(0)});
  r.engine->run(s);
  const auto newest = latest_checkpoint(run);
  ASSERT_TRUE(newest.has_value());
  const auto c = load_checkpoint(*newest, *r.model, r.opt.get());
  EXPECT_EQ(c.state.step, 2);
  EXPECT_FALSE(c.state.rng_device_ranks.defined());
}

// On a GPU: rank 1 of 2 takes row 1; a world of 3 leaves the stream as it was.
TEST(Checkpoint, CudaRestoresEachRanksOwnDeviceStream) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  torch::cuda::manual_seed(1);
  const auto r0 = RandomStates::capture(cuda).device;
  const auto want = torch::rand({4}, cuda);
  const auto r1 = RandomStates::capture(cuda).device;  // after one draw: another offset
  const auto next = torch::rand({4}, cuda);
  TrainState s;
  s.rng_device_ranks = torch::stack({r0, r1});
  restore_rank_device_rng(s, 1, 2, cuda);
  EXPECT_TRUE(torch::equal(torch::rand({4}, cuda), next));
  restore_rank_device_rng(s, 0, 2, cuda);
  EXPECT_TRUE(torch::equal(torch::rand({4}, cuda), want));
  restore_rank_device_rng(s, 1, 3, cuda);  // another world size: unchanged
  EXPECT_TRUE(torch::equal(torch::rand({4}, cuda), next));
}

}  // namespace
}  // namespace rpe
