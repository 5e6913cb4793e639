// The tiny training fixture (see tiny_run.h).
#include "tiny_run.h"

#include <fstream>
#include <sstream>

#include "data/sp_tokenizer.h"
#include "model/add_norm.h"
#include "model/attention/m3.h"
#include "model/attention/relative_layout.h"
#include "util/errors.h"
#include "test_paths.h"

namespace rpe::test {
namespace fs = std::filesystem;

const fs::path& tiny_data_dir() {
  static const fs::path dir = [] {
    const fs::path d = process_temp_dir() / "tiny";
    fs::create_directories(d);
    // The first 600 lines (~100 short documents) of the sample corpus.
    std::ifstream in(rpe::test::source_dir() + "/data/sample/corpus.txt");
    std::ofstream out(d / "corpus.txt");
    std::string line;
    for (int i = 0; i < 600 && std::getline(in, line); ++i) out << line << "\n";
    out.close();
    train_sentencepiece({(d / "corpus.txt").string()}, "blank_line", d / "tokenizer.model", 200, true);
    std::ofstream yaml(d / "base.yaml");
    yaml << "model: {hidden: 32, layers: 2, heads: 2, ffn: 64, max_position: 32, dropout: 0.1,\n"
            "        attention_dropout: 0.1, attention: {method: absolute}}\n"
            "data: {train_files: [" << (d / "corpus.txt").string() << "], tokenizer: sentencepiece,\n"
            "       tokenizer_model: " << (d / "tokenizer.model").string() << ", max_seq_len: 32,\n"
            "       valid_fraction: 0.05}\n"
            "train: {batch_size: 8, max_steps: 8, lr: 1.0e-3, warmup_steps: 2, log_every: 2, eval_every: 0,\n"
            "        eval_batches: 2, device: cpu, threads: 1, seed: 7}\n";
    return d;
  }();
  return dir;
}

Config tiny_config(const std::vector<std::string>& overrides) {
  return load_config(tiny_data_dir() / "base.yaml", overrides);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = tiny_data_dir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::vector<torch::Device> devices_to_test() {
  std::vector<torch::Device> d{torch::kCPU};
  if (torch::cuda::is_available()) {
    d.emplace_back(torch::kCUDA);
    // The CUDA kernels' one-time checks against their references (m3's, the relative layout's,
    // add & norm's: copies both ways) run at their first use: here, before any test watches
    // the device's reads.
    m3_cuda_usable(d.back());
    relative_layout_usable(d.back());
    add_norm_kernel_usable(d.back());
  }
  return d;
}

}  // namespace rpe::test
