// Shared fixture of the training tests: a small corpus cut from data/sample/corpus.txt, a
// sentencepiece model trained on it once per test binary, and a config of a 2-layer,
// hidden-32 BERT that trains a step in milliseconds on one CPU thread.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace rpe::test {

// Folder with corpus.txt, tokenizer.model and base.yaml (created on first use).
const std::filesystem::path& tiny_data_dir();

// The tiny config with `overrides` ("train.max_steps=6") applied.
Config tiny_config(const std::vector<std::string>& overrides = {});

// A fresh, empty folder under the test temp dir.
std::filesystem::path fresh_dir(const std::string& name);

}  // namespace rpe::test
