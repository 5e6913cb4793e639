// Evaluation results as JSON lines: every evaluation appends one object per metric to a
// results file (default results/results.jsonl), and the tables are rendered from those
// lines only (never parsed out of logs).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace rpe::eval {

struct ResultRow {
  std::string run_id;          // fine-tuning run folder name (+ "/seed<N>")
  std::string method;          // model.attention.method
  int64_t k = 0;               // clipping distance actually used by the model (log buckets: where they end)
  int64_t position_buckets = 0;  // log buckets of distance (deberta's model.attention.position_buckets), 0 = none
  std::string pretrain_run;    // the --init run folder or checkpoint ("" = from scratch)
  // The checkpoint file loaded ("step_00000400.pt"; "" from scratch and in lines of before the
  // field): --init of a run folder takes its newest, which a resumed pretraining moves on.
  std::string pretrain_checkpoint;
  int64_t pretrain_max_len = 0;  // data.max_seq_len of pretraining (0 = from scratch: --init none)
  // The method the --init weights learned in pretraining (model.pretrained_method, else its
  // attention.method); another than `method` is a swap (swap-method, or --init of a run of
  // another method). "" from scratch and in lines of before the field: not known.
  std::string pretrain_method;
  std::string task;            // squad_v1 | squad_v2 | cola | ... (GLUE task names)
  std::string split;           // dev | dev_matched | dev_mismatched
  int64_t seed = 0;
  std::string metric;          // exact, f1, accuracy, mcc, pearson, spearman, best_f1, ...
  double value = 0.0;
  int64_t finetune_max_len = 0;  // finetune.max_seq_len
  int64_t examples = 0;        // evaluated examples
  std::string select = "final";  // finetune.select: the weights scored, the last (final) or dev-best (best)
  std::string git_revision;
  std::string time;            // UTC, ISO 8601
  std::string run_dir;         // the fine-tuning run folder, absolute ("" in lines of before the field)
  // When that folder was made for this run (utc_now_ns; "" in lines of before the field): a run
  // that --overwrite replaced left lines with an older time under the same run_dir.
  std::string run_started;
};

// Whether the row's model was given its method after pretraining with another (known only in
// lines that record pretrain_method).
inline bool swapped_method(const ResultRow& r) { return !r.pretrain_method.empty() && r.pretrain_method != r.method; }

// A table's row name for results scored with `select`: as is for the paper's protocol (fixed
// epochs, final weights), else "<what> (select <select>)", never pooled with it.
inline bool papers_protocol(const std::string& select) { return select == "final"; }
inline std::string with_protocol(const std::string& what, const std::string& select) {
  return papers_protocol(select) ? what : what + " (select " + select + ")";
}

// A method as the tables name it: a bucketed deberta is another model than the clipped one.
// A swapped one, "m4 (swapped into absolute pretraining)", is another model than one pretrained
// with its method.
inline std::string method_text(const std::string& method, int64_t position_buckets,
                               const std::string& pretrain_method = "") {
  const std::string text =
      position_buckets > 0 ? method + " (" + std::to_string(position_buckets) + " log buckets)" : method;
  return pretrain_method.empty() || pretrain_method == method ? text
                                                              : text + " (swapped into " + pretrain_method + " pretraining)";
}

nlohmann::json to_json(const ResultRow& r);
// UserError naming `where` when a field is missing or mistyped.
ResultRow result_from_json(const nlohmann::json& j, const std::string& where);

// The pretraining run a row starts from: its folder (a run's checkpoints/ stands for the run), or
// for --init of one checkpoint file, that file (another step of the same run is another model).
std::filesystem::path pretrain_identity(const std::string& pretrain_run);

// The fine-tuning experiment a line belongs to, whose seeds the tables pool: its run folder's
// name without "_s<seed>" (the reproduction scripts' folder per seed, m4_s1 and m4_s2) and, for a
// GLUE task, without "_<task>" (m4_mrpc_s1 -> m4: one experiment's tasks are one table row); a
// GLUE run in its default folder <run.name>/<task> is named by run.name ("" for such a line of
// before run_dir). Seeds of runs of other names (another learning rate) are not one cell.
std::string finetune_run_name(const ResultRow& r);

// One line per run id (and seed) that two run folders wrote: run ids are the folder's name,
// so runs/lr3e-5/squad and runs/lr5e-5/squad share theirs and the tables keep the later line
// (a re-evaluation of one folder replaces its own lines, as meant) where their rows agree in all
// else the tables key a row by (method, k, lengths, pretraining run, select, task, split,
// metric); rows that differ there stay apart and are not named. The tables print these.
std::vector<std::string> run_id_clashes(const std::vector<ResultRow>& rows);

// The rows of the runs that hold their folders now: a folder replaced by a later run of the same
// run_dir (--overwrite deletes the old seeds; their lines stay in every results file they were
// appended to) keeps only the lines of its newest run_started. Lines without run_started (of
// before the field) go too where dated lines name their run_dir (that run replaced theirs), and
// are kept where none do, as are lines without a run_dir. One note per replaced run goes to `notes`.
std::vector<ResultRow> current_rows(const std::vector<ResultRow>& rows, std::vector<std::string>& notes);

// Appends one line per row (fsynced, so a crash loses nothing already reported).
void append_results(const std::filesystem::path& file, const std::vector<ResultRow>& rows);
// Reads all rows; a malformed line is a UserError naming file:line, except the file's last line
// without its newline that begins as a row ("{": a write a crash cut short), left out with a
// warning.
std::vector<ResultRow> read_results(const std::filesystem::path& file);

// "2026-11-22T07:30:00Z"
std::string utc_now();
// "2026-11-22T07:30:00.123456789Z": of one width, so that later times sort after earlier ones.
std::string utc_now_ns();

}  // namespace rpe::eval
