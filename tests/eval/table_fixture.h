// What the results-table tests (test_tables.cpp, test_extra_tables.cpp) share: SQuAD result
// lines as fine-tuning appends them, and (from data_test_util.h) the per-test temporary folder.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/data_test_util.h"  // temp_dir, remove_tree, write_text
#include "eval/results.h"

namespace rpe::test {

// One SQuAD v1.1 dev result line: `metric` ("exact", "f1", ...) = `value` of run `run_id`, a
// `method` model with clipping distance `k` (0: none) pretrained at length 128 in
// `pretrain_run` and fine-tuned at length `finetune_len` with `seed`.
inline eval::ResultRow squad_row(const std::string& run_id, const std::string& method, int64_t k,
                                 int64_t finetune_len, int64_t seed, const std::string& metric, double value,
                                 const std::string& pretrain_run = "runs/pre") {
  eval::ResultRow r;
  r.run_id = run_id;
  r.method = method;
  r.k = k;
  r.pretrain_run = pretrain_run;
  r.pretrain_max_len = 128;
  r.task = "squad_v1";
  r.split = "dev";
  r.seed = seed;
  r.metric = metric;
  r.value = value;
  r.finetune_max_len = finetune_len;
  return r;
}

// A table's notes but the one on lines that do not record their pretraining method (the
// fixture's rows do not), for tests of other notes.
inline std::vector<std::string> notes_but_lineage(std::vector<std::string> notes) {
  notes.erase(std::remove_if(notes.begin(), notes.end(),
                             [](const std::string& n) { return n.find("do not record the pretraining method") != std::string::npos; }),
              notes.end());
  return notes;
}

}  // namespace rpe::test
