// Fuzz targets for the readers of untrusted files, one per build (RPE_FUZZ_<READER>):
// the input bytes are written to a file and read by the project's own reader. A UserError
// (a one-line message for the user) is the expected outcome of a bad input; any other
// exception, a crash or a sanitizer report is a finding.
//   yaml         load_config (YAML, extends, validation)        corpus  read_documents
//   glue         read_glue_tsv (first byte picks the task)      squad   read_squad
//   shard        MappedShard + a walk over every record          safetensors  read_safetensors
// Built with clang it is a libFuzzer target (-fsanitize=fuzzer); with another compiler
// (RPE_FUZZ_STANDALONE) main() below replays the seeds and mutates them for N runs.
// RPE_FUZZ_MAKE_SEED=DIR writes a valid seed input into DIR and exits (shard, safetensors).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/errors.h"

#if defined(RPE_FUZZ_YAML)
#include "config/config.h"
#elif defined(RPE_FUZZ_CORPUS)
#include "data/corpus.h"
#elif defined(RPE_FUZZ_GLUE)
#include "finetune/glue_data.h"
#elif defined(RPE_FUZZ_SQUAD)
#include "finetune/squad_data.h"
#elif defined(RPE_FUZZ_SHARD)
#include "data/shard.h"
#elif defined(RPE_FUZZ_SAFETENSORS)
#include "interop/safetensors.h"
#else
#error "define one RPE_FUZZ_<READER>"
#endif

namespace fs = std::filesystem;

namespace {

// One scratch file per process (libFuzzer's -fork/-jobs run several processes).
const fs::path& scratch_file() {
  static const fs::path file = [] {
    const fs::path dir = fs::temp_directory_path() / ("rpe_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / "input";
  }();
  return file;
}

void write_bytes(const fs::path& file, const uint8_t* data, size_t size) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

#if defined(RPE_FUZZ_YAML)
void read_input(const fs::path& file, const uint8_t*, size_t) { rpe::load_config(file); }
#elif defined(RPE_FUZZ_CORPUS)
void read_input(const fs::path& file, const uint8_t*, size_t) { rpe::read_documents(file); }
#elif defined(RPE_FUZZ_GLUE)
void read_input(const fs::path& file, const uint8_t* data, size_t size) {
  static const char* tasks[] = {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"};
  const char* task = tasks[size > 0 ? data[0] % 9 : 0];
  write_bytes(file, size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0);
  for (const auto& ex : rpe::finetune::read_glue_tsv(file, rpe::finetune::glue_task(task)))
    if (ex.a.size() > (size_t{1} << 32)) std::abort();  // touch every example
}
#elif defined(RPE_FUZZ_SQUAD)
void read_input(const fs::path& file, const uint8_t*, size_t) {
  // Every answer span must lie inside its context once read.
  for (const auto& ex : rpe::finetune::read_squad(file))
    for (const auto& a : ex.answers)
      if (a.begin < 0 || a.end < a.begin || static_cast<size_t>(a.end) > ex.context.size()) std::abort();
}
#elif defined(RPE_FUZZ_SHARD)
void read_input(const fs::path& file, const uint8_t*, size_t) {
  rpe::MappedShard shard(file);
  const auto& s = shard.stream();
  uint64_t sum = 0;
  for (int64_t i = 0; i < s.tokens; ++i) sum += static_cast<uint64_t>(s.id(i)) + s.word_start(i);
  for (int64_t i = 0; i < s.sentences; ++i) sum += s.sentence_ends[i];
  for (int64_t i = 0; i < s.documents; ++i) sum += s.document_ends[i];
  if (sum == 1) std::fprintf(stderr, "%s", "");  // keep the walk
}
#elif defined(RPE_FUZZ_SAFETENSORS)
void read_input(const fs::path& file, const uint8_t*, size_t) {
  for (const auto& [name, t] : rpe::read_safetensors(file).tensors)
    if (t.numel() < 0) std::abort();
}
#endif

void make_seed(const fs::path& dir) {
  fs::create_directories(dir);
#if defined(RPE_FUZZ_SHARD)
  rpe::ShardBuilder b;
  const int32_t ids[] = {5, 6, 7, 8, 9, 10, 11};
  const uint8_t starts[] = {1, 0, 1, 1, 0, 1, 1};
  b.add_document(ids, starts, {3, 4});
  b.add_document(ids, starts, {2});
  b.write(dir / "seed.shard", 100);
#elif defined(RPE_FUZZ_SAFETENSORS)
  rpe::write_safetensors(dir / "seed.safetensors",
                         {{"a", torch::arange(6, torch::kFloat32).view({2, 3})}, {"b", torch::ones({4}, torch::kInt64)}},
                         {{"format", "pt"}});
#else
  std::fprintf(stderr, "this reader's seeds come from the repository's sample files\n");
#endif
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("RPE_FUZZ_MAKE_SEED")) {
    make_seed(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& file = scratch_file();
  write_bytes(file, data, size);
  try {
    read_input(file, data, size);
  } catch (const rpe::UserError&) {
    // The expected outcome of a bad input (main() prints it as one line, exit 2).
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not a UserError: %s\n", e.what());
    std::abort();
  }
  return 0;
}

#if defined(RPE_FUZZ_STANDALONE)
// Without libFuzzer: replay every seed file given, then mutate them (bit flips, byte
// changes, insertions, deletions, truncation, duplicated chunks) for -runs=N inputs.
#include <random>
#include <vector>

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  long runs = 1000;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-runs=", 0) == 0) runs = std::stol(arg.substr(6));
    else if (arg[0] != '-' && fs::is_directory(arg))
      for (const auto& e : fs::directory_iterator(arg)) {
        std::ifstream in(e.path(), std::ios::binary);
        seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
  }
  if (seeds.empty()) seeds.emplace_back();
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  std::mt19937_64 rng(12345);
  for (long r = 0; r < runs; ++r) {
    std::string in = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = in.empty() ? 0 : rng() % in.size();
      switch (rng() % 6) {
        case 0: if (!in.empty()) in[pos] ^= static_cast<char>(1 << (rng() % 8)); break;
        case 1: if (!in.empty()) in[pos] = static_cast<char>(rng()); break;
        case 2: in.insert(pos, 1, static_cast<char>(rng())); break;
        case 3: if (!in.empty()) in.erase(pos, 1 + rng() % 8); break;
        case 4: in.resize(pos); break;
        case 5: if (!in.empty()) in.insert(pos, in.substr(rng() % in.size(), 1 + rng() % 16)); break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  std::printf("Done %ld runs (standalone driver)\n", runs + static_cast<long>(seeds.size()));
  return 0;
}
#endif
