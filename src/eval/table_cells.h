// The cells of Tables 2-4 (tables.h): result rows grouped into table rows (GroupKey), each
// (row, task, split, metric) holding its evaluations by run and seed. Shared by the table
// definitions (tables.cpp) and their rendering (table_render.cpp); the extra SQuAD tables
// (squad_tables.cpp) pool their evaluations with the same rule (pool_most_examples).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "eval/results.h"
#include "eval/tables.h"

namespace rpe::eval::tables_detail {

struct GroupKey {
  std::string method;
  int64_t k, pretrain_len, finetune_len;
  std::string pretrain_run;
  std::string select;  // finetune.select: dev-best weights are another protocol than the final ones
  int64_t buckets;     // log buckets of distance (deberta), 0 = none: another model than the clipped one
  // The method the weights were pretrained with where `method` was swapped in (swapped_method),
  // else "": another model than one pretrained with `method`, without the paper's numbers.
  std::string swapped_from = "";
  // finetune_run_name: seeds of fine-tuning runs of other names (another learning rate) are not
  // one cell; named in the method cell where a table has rows alike in all else (named_run).
  std::string finetune_run = "";
  bool named_run = false;
  auto tie() const {
    return std::tie(method, buckets, swapped_from, k, pretrain_len, finetune_len, pretrain_run, select, finetune_run);
  }
  // The method cell: its log buckets and the protocol named where it is not the paper's (fixed
  // epochs, final weights).
  std::string label() const {
    const std::string what = with_protocol(method_text(method, buckets, swapped_from), select);
    return named_run ? what + " (fine-tuning run " + (finetune_run.empty() ? "?" : finetune_run) + ")" : what;
  }
  bool operator<(const GroupKey& o) const { return tie() < o.tie(); }
  bool alike_but_run(const GroupKey& o) const {
    GroupKey a = *this;
    a.finetune_run = o.finetune_run;
    return !(a < o) && !(o < a);
  }
};

struct Column {
  std::string title, task, split, metric;
};

// One evaluation: its value and how many dev examples it scored.
struct Scored {
  double value = 0;
  int64_t examples = 0;
};

// (group, task, split, metric) -> evaluations by "run_id#seed"; a repeated evaluation of the
// same run and seed replaces the earlier one.
using Values = std::map<std::tuple<GroupKey, std::string, std::string, std::string>, std::map<std::string, Scored>>;

// The cells of `rows`, grouped by row (GroupKey).
Values collect(const std::vector<ResultRow>& rows);

// The evaluations of a cell that scored the most examples (the whole dev set, where any did):
// their values and that count; the others (run, examples scored) are another quantity, never
// pooled. Tables 2-4 (lookup) and the extra SQuAD tables (squad_tables.cpp) pool alike.
struct Pooled {
  std::vector<double> values;
  int64_t most = 0;
  std::vector<std::pair<std::string, int64_t>> left_out;
};
Pooled pool_most_examples(const std::map<std::string, Scored>& evals);

// Mean ± std of a cell over the evaluations of the whole dev set (nullopt: no such cell); each
// evaluation left out as scored on part of it is named in `left_out`.
std::optional<Stat> lookup(const Values& v, const GroupKey& g, const Column& c, std::vector<std::string>& left_out);

}  // namespace rpe::eval::tables_detail
