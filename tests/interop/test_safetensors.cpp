// safetensors reader/writer: hand-built files (the format written out byte by byte in the
// test, independent of the writer), round trips and malformed input.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>

#include "interop/safetensors.h"
#include "util/errors.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace rpe;

namespace {

fs::path temp_file(const std::string& name) {
  fs::path dir = rpe::test::process_temp_dir() / "safetensors";
  fs::create_directories(dir);
  return dir / name;
}

// [u64 N][header][data] exactly as the format specifies.
void write_raw(const fs::path& f, const std::string& header, const std::string& data) {
  std::ofstream out(f, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

std::string bytes_of(std::initializer_list<uint16_t> v) {
  std::string s;
  for (uint16_t x : v) s.append(reinterpret_cast<const char*>(&x), 2);
  return s;
}

void expect_error(const fs::path& f, const std::string& fragment) {
  try {
    read_safetensors(f);
    FAIL() << "no error for " << fragment;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
  }
}

}  // namespace

TEST(Safetensors, ReadsHandBuiltFileInEveryFloatDtype) {
  const fs::path f = temp_file("hand.safetensors");
  float f32[2] = {1.5f, -2.0f};
  // F16 1.0 = 0x3C00, -0.5 = 0xB800; BF16 1.0 = 0x3F80, 3.0 = 0x4040.
  std::string data(reinterpret_cast<const char*>(f32), 8);
  data += bytes_of({0x3C00, 0xB800}) + bytes_of({0x3F80, 0x4040});
  write_raw(f, R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
               R"("h":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}})",
            data);
  const auto st = read_safetensors(f);
  EXPECT_EQ(st.metadata.at("format"), "pt");
  const auto& a = st.tensors.at("a");
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_FLOAT_EQ(a[0][0].item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(a[1][0].item<float>(), -2.0f);
  EXPECT_EQ(st.tensors.at("h").scalar_type(), torch::kFloat16);
  EXPECT_FLOAT_EQ(st.tensors.at("h")[1].item<float>(), -0.5f);
  EXPECT_EQ(st.tensors.at("b").scalar_type(), torch::kBFloat16);
  EXPECT_FLOAT_EQ(st.tensors.at("b")[1].item<float>(), 3.0f);
}

TEST(Safetensors, WriterRoundTripsAndAlignsTheData) {
  const fs::path f = temp_file("rt.safetensors");
  torch::manual_seed(0);
  std::vector<std::pair<std::string, torch::Tensor>> in{
      {"w", torch::randn({3, 4})}, {"half", torch::randn({5}).to(torch::kFloat16)},
      {"bf", torch::randn({2, 2}).to(torch::kBFloat16)}, {"ids", torch::arange(7)}, {"empty", torch::zeros({0, 3})}};
  write_safetensors(f, in, {{"format", "pt"}});
  std::ifstream raw(f, std::ios::binary);
  uint64_t n = 0;
  raw.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto st = read_safetensors(f);
  ASSERT_EQ(st.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    EXPECT_EQ(st.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(st.tensors.at(name).equal(t)) << name;
  }
}

TEST(Safetensors, MalformedFilesGiveOneLineErrors) {
  const fs::path f = temp_file("bad.safetensors");
  { std::ofstream(f, std::ios::binary) << "abc"; }
  expect_error(f, "truncated");
  write_raw(f, "{not json", "");
  expect_error(f, "not valid JSON");
  write_raw(f, R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "x");
  expect_error(f, "unsupported dtype F8_E4M3");
  write_raw(f, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_error(f, "do not hold 3 F32 values");
  write_raw(f, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(10, '\0'));
  expect_error(f, "truncated safetensors file: data ends at byte 16");
  write_raw(f, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0'));
  expect_error(f, "overlap");
  // The tensors must tile the data buffer, as the safetensors library requires: no gap, no tail.
  write_raw(f, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            std::string(12, '\0'));
  expect_error(f, "unused bytes [4, 8) between tensors");
  write_raw(f, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(11, '\0'));
  expect_error(f, "3 bytes after its last tensor");
  // A header length pointing past the end of the file.
  {
    std::ofstream out(f, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_error(f, "truncated safetensors file: header needs 1000 bytes");
  // A real file cut short.
  write_safetensors(f, {{"w", torch::ones({64})}});
  fs::resize_file(f, fs::file_size(f) - 10);
  expect_error(f, "truncated");
}

// Hostile headers cost no more memory than the file: overlapping entries are refused before
// any tensor is allocated (2,000 entries naming the same 4 MB would otherwise allocate 8 GB
// first), and nesting beyond a real header's depth stops the JSON parser at once.
TEST(Safetensors, HostileHeadersAreRefusedBeforeTheyCostMemory) {
  const fs::path f = temp_file("hostile.safetensors");
  std::string header = "{";
  for (int i = 0; i < 2000; ++i)
    header += std::string(i ? "," : "") + "\"t" + std::to_string(i) +
              R"(":{"dtype":"F32","shape":[1048576],"data_offsets":[0,4194304]})";
  header += "}";
  write_raw(f, header, std::string(4194304, '\0'));
  // Address space: what the process maps now plus 2 GB, far below the 8 GB those entries ask for.
  rlim_t mapped = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) mapped = static_cast<rlim_t>(std::stoull(line.substr(7))) << 10;
  rlimit old{};
  getrlimit(RLIMIT_AS, &old);
  rlimit capped = old;
  capped.rlim_cur = std::min<rlim_t>(old.rlim_cur, mapped + (rlim_t{2} << 30));
  setrlimit(RLIMIT_AS, &capped);
  expect_error(f, "overlap");
  setrlimit(RLIMIT_AS, &old);
  write_raw(f, std::string(100000, '[') + std::string(100000, ']'), "");
  expect_error(f, "JSON nested deeper than 8 levels");
}

TEST(Safetensors, OverflowingShapesAreRefusedNamingTheTensor) {
  const fs::path f = temp_file("overflow.safetensors");
  // 2^62 * 4 elements wraps to 0 in 64 bits, which would match the empty data_offsets.
  write_raw(f, R"({"big":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", "");
  expect_error(f, "tensor 'big': shape [4611686018427387904,4] has more elements than fit in 64 bits");
  // 2^62 elements fit, their 2^64 bytes do not (wrapping to 0 again).
  write_raw(f, R"({"wide":{"dtype":"F32","shape":[2305843009213693952,2],"data_offsets":[0,0]}})", "");
  expect_error(f, "tensor 'wide': shape [2305843009213693952,2] needs more bytes than fit in 64 bits");
  // A single size above INT64_MAX would turn negative as a LibTorch size.
  write_raw(f, R"({"neg":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,0]}})", "");
  expect_error(f, "tensor 'neg': shape [9223372036854775808]");
  // A zero among huge sizes is a valid empty tensor.
  write_raw(f, R"({"empty":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})", "");
  EXPECT_EQ(read_safetensors(f).tensors.at("empty").numel(), 0);
}

TEST(Safetensors, FolderInsteadOfFileIsNamed) {
  const fs::path d = temp_file("folder.safetensors");
  fs::create_directories(d);
  expect_error(d, "folder.safetensors: is a folder");
}

TEST(Safetensors, WriterFailureSaysWhyAndLeavesNoTempFile) {
  // A file-size limit makes write() fail with EFBIG (SIGXFSZ ignored), as a full disk
  // makes it fail with ENOSPC: the message must carry the system's reason.
  const fs::path dir = temp_file("limited");
  fs::create_directories(dir);
  const fs::path f = dir / "w.safetensors";
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_safetensors(f, {{"w", torch::ones({16384})}});
  } catch (const std::system_error& e) {  // not a UserError: the environment's fault (exit 1)
    message = e.what();
    EXPECT_EQ(e.code().value(), EFBIG);
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("cannot write " + f.string() + ": File too large"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(f));
  EXPECT_TRUE(fs::is_empty(dir)) << "the temporary file must be removed";
}
