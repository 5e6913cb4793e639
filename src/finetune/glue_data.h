// GLUE tasks in the standard layout written by download_glue_data.py: one folder per task
// with train.tsv and dev.tsv (MNLI: dev_matched.tsv, dev_mismatched.tsv). Fields are split
// on '\t' only (no CSV quoting: some texts begin with '"'); CoLA has no header; MRPC's
// header starts with a UTF-8 BOM. Inputs are [CLS] a [SEP] (b [SEP]), the longer side
// truncated first (BERT's _truncate_seq_pair) to max_seq_len.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace rpe::finetune {

struct GlueTask {
  std::string name;                   // finetune.task
  std::string folder;                 // folder in the GLUE release (CoLA, SST-2, ...)
  bool header = true;                 // first line is a header
  int64_t columns = 0;                // fields per line
  int64_t text_a = 0, text_b = -1;    // field indices (-1: single sentence)
  int64_t label = 0;                  // field index of the label
  std::vector<std::string> labels;    // class names in id order; empty = regression
  std::vector<std::string> dev_splits;  // dev file stems (MNLI has two)
  // An unlabelled file's text columns, by header name, and columns that mark another task's
  // test file with the same text columns (QNLI's "question", STS-B's "filename", MNLI's
  // "pairID", both "genre").
  std::vector<std::string> test_text, foreign;
};

// The task spec for a finetune.task name (UserError for squad or unknown names).
const GlueTask& glue_task(const std::string& name);
// The GLUE tasks' names, in the table's order (cola, sst2, ...).
std::vector<std::string> glue_task_names();

struct GlueExample {
  std::string a, b;
  double label = 0;  // class id, or the score for STS-B
};

// Reads one TSV file of `task`. A wrong field count or an unknown label is a UserError
// naming the file and the line.
std::vector<GlueExample> read_glue_tsv(const std::filesystem::path& file, const GlueTask& task);

// Any GLUE file of `task` for prediction: a labelled train/dev file (read_glue_tsv), or an
// unlabelled test file (test.tsv, test_matched.tsv, AX's diagnostic.tsv), whose header names its
// columns: "index"/"id", the task's text columns (task.test_text: sentence, sentence1/2,
// question + sentence, question1/2, "#1 String"/"#2 String"), none of task.foreign, and no label
// column. Another task's test file is refused, where its header tells (CoLA's and SST-2's, or
// RTE's, WNLI's and AX's, are alike).
struct GlueInputs {
  std::vector<GlueExample> examples;
  std::vector<std::string> index;  // the file's index column (test files); empty for labelled files
  bool labelled = false;
};
GlueInputs read_glue_inputs(const std::filesystem::path& file, const GlueTask& task);

// [CLS] a [SEP] b [SEP] ids for a pair task (`pair`: the task has a second text, even where an
// example's is empty, as BERT and HF encode it), [CLS] a [SEP] otherwise; truncated to max_len
// from the longer side.
std::vector<int64_t> encode_pair(const Tokenizer& tok, const std::string& a, const std::string& b, bool pair,
                                 int64_t max_len);

}  // namespace rpe::finetune
