// The published sizes of the dev sets the paper scores on, the only place these counts live: a
// result line's `examples` below its set's size was scored on part of it (finetune.max_eval_examples,
// or a sample dev file), another quantity than the paper's full-dev numbers (tables.h,
// squad_tables.h mark such cells).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace rpe::eval {

// Questions (SQuAD) or examples (GLUE) of the whole dev split of `task`; nullopt for a set of
// unknown size. SQuAD: Rajpurkar et al. 2016/2018; GLUE: the GLUE benchmark's dev files
// (tests/finetune/test_glue_data.cpp checks them against ../shared/data/glue).
inline std::optional<int64_t> full_dev_size(const std::string& task, const std::string& split) {
  struct Size {
    const char *task, *split;
    int64_t n;
  };
  static constexpr Size kSizes[] = {
      {"squad_v1", "dev", 10570},      {"squad", "dev", 10570},  // "squad": lines of before squad_v1
      {"squad_v2", "dev", 11873},      {"mnli", "dev_matched", 9815}, {"mnli", "dev_mismatched", 9832},
      {"qqp", "dev", 40430},           {"sst2", "dev", 872},          {"mrpc", "dev", 408},
      {"cola", "dev", 1043},           {"stsb", "dev", 1500},         {"qnli", "dev", 5463},
      {"rte", "dev", 277},             {"wnli", "dev", 71},
  };
  for (const auto& s : kSizes)
    if (task == s.task && split == s.split) return s.n;
  return std::nullopt;
}

// Whether an evaluation of `examples` (0: a line of before the field, unknown) scored less or
// other than the whole dev split: then "N of M" names it (full: its size).
inline bool partial_dev(const std::string& task, const std::string& split, int64_t examples) {
  const auto full = full_dev_size(task, split);
  return examples > 0 && full && examples != *full;
}

// "300 of 10570" for an evaluation of part of the dev split (partial_dev), else "": the words
// every table marks such a cell with.
inline std::string dev_part_text(const std::string& task, const std::string& split, int64_t examples) {
  if (!partial_dev(task, split, examples)) return "";
  return std::to_string(examples) + " of " + std::to_string(*full_dev_size(task, split));
}

}  // namespace rpe::eval
