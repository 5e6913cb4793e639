// Fine-tuning inputs (see prepare.h).
#include "finetune/prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "data/tokenizer.h"
#include "finetune/finetune.h"
#include "interop/method_swap.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

template <class T> void take_first(std::vector<T>& v, int64_t n) {
  if (n > 0 && static_cast<int64_t>(v.size()) > n) v.resize(n);
}

void read_squad_inputs(Prepared& p) {
  const auto& f = p.rc.cfg.finetune;
  const auto t0 = Clock::now();
  require(!f.train_file.empty(), "finetune.train_file: missing (the SQuAD train JSON)");
  require(!f.dev_file.empty(), "finetune.dev_file: missing (the SQuAD dev JSON)");
  for (const auto& file : {f.train_file, f.dev_file})
    if (!input_exists(file))  // a link loop is no missing download: its own error
      throw UserError(file + ": file not found (`scripts/download_data.sh squad` fetches SQuAD into data/full/; or set " +
                      "finetune.train_file/dev_file)");
  p.train_ex = read_squad(f.train_file);
  p.dev_ex = read_squad(f.dev_file);
  if (!f.squad_v2) {  // results filed as SQuAD 1.1 (Tables 2 and 4) must be SQuAD 1.1's
    refuse_unanswerable(f.train_file, p.train_ex);
    refuse_unanswerable(f.dev_file, p.dev_ex);
  }
  take_first(p.train_ex, f.max_train_examples);
  take_first(p.dev_ex, f.max_eval_examples);
  const SquadFeatureOptions fo{f.max_seq_len, f.doc_stride, f.max_query_len};
  p.train_f = make_squad_features(p.train_ex, *p.tok, fo, nullptr);
  p.dev_f = make_squad_features(p.dev_ex, *p.tok, fo, &p.dev_off);
  log::info("data", "SQuAD {}: {} train questions -> {} windows, {} dev questions -> {} windows | {:.1f}s",
            f.squad_v2 ? "2.0" : "1.1", p.train_ex.size(), p.train_f.size(), p.dev_ex.size(), p.dev_f.size(),
            std::chrono::duration<double>(Clock::now() - t0).count());
}

void read_glue_inputs(Prepared& p) {
  const auto& f = p.rc.cfg.finetune;
  const auto t0 = Clock::now();
  p.glue = &glue_task(f.task);
  const GlueFiles files = glue_files(f, *p.glue);
  auto train = read_glue_tsv(files.train, *p.glue);
  take_first(train, f.max_train_examples);
  for (const auto& ex : train) {
    p.train_ids.push_back(encode_pair(*p.tok, ex.a, ex.b, p.glue->text_b >= 0, f.max_seq_len));
    p.train_labels.push_back(ex.label);
  }
  for (const auto& [split, file] : files.dev) {
    auto dev = read_glue_tsv(file, *p.glue);
    take_first(dev, f.max_eval_examples);
    Prepared::Split s{split, {}, {}};
    for (const auto& ex : dev) {
      s.ids.push_back(encode_pair(*p.tok, ex.a, ex.b, p.glue->text_b >= 0, f.max_seq_len));
      s.labels.push_back(ex.label);
    }
    p.dev.push_back(std::move(s));
  }
  log::info("data", "GLUE {}: {} train, {} | {:.1f}s", f.task, p.train_ids.size(),
            p.dev.size() == 2 ? std::to_string(p.dev[0].ids.size()) + "/" + std::to_string(p.dev[1].ids.size()) + " dev"
                              : std::to_string(p.dev[0].ids.size()) + " dev",
            std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace

GlueFiles glue_files(const FinetuneOptions& f, const GlueTask& task) {
  require(!f.data_dir.empty() || !f.glue_dir.empty(),
          "finetune.data_dir: missing (or set finetune.glue_dir to the GLUE root)");
  const fs::path dir = f.data_dir.empty() ? fs::path(f.glue_dir) / task.folder : fs::path(f.data_dir);
  if (std::error_code ec; !fs::is_directory(dir, ec))
    throw UserError(dir.string() + ": no such GLUE task folder (`scripts/download_data.sh glue` fetches GLUE into " +
                    "data/full/glue/; or set finetune.glue_dir)");
  if (!f.dev_file.empty() && task.dev_splits.size() != 1)
    throw UserError("finetune.dev_file: " + f.task + " is scored on " + std::to_string(task.dev_splits.size()) +
                    " dev files (" + join(task.dev_splits, ".tsv, ") + ".tsv): set finetune.data_dir to the folder "
                    "that holds them instead");
  GlueFiles files;
  files.train = f.train_file.empty() ? dir / "train.tsv" : fs::path(f.train_file);
  for (const auto& split : task.dev_splits)
    files.dev.emplace_back(split, f.dev_file.empty() ? dir / (split + ".tsv") : fs::path(f.dev_file));
  return files;
}

std::vector<fs::path> finetune_input_files(const Config& cfg) {
  const auto& f = cfg.finetune;
  std::vector<fs::path> files;
  if (!cfg.data.tokenizer_model.empty()) files.emplace_back(cfg.data.tokenizer_model);
  if (f.task == "squad") {
    for (const auto& file : {f.train_file, f.dev_file})
      if (!file.empty()) files.emplace_back(file);
    return files;
  }
  const GlueFiles glue = glue_files(f, glue_task(f.task));
  files.push_back(glue.train);
  for (const auto& [split, file] : glue.dev) files.push_back(file);
  return files;
}

Batch batch_of(const Prepared& p, const std::vector<const std::vector<int64_t>*>& seqs, const torch::Device& device) {
  const auto& special = p.tok->special();
  const auto& f = p.rc.cfg.finetune;
  return make_batch(seqs, special.pad, device, f.token_types ? special.sep : -1, f.pad_to_multiple, f.max_seq_len);
}

Prepared prepare(const FinetuneRequest& req) {
  Prepared p;
  p.rc = resolve_finetune_config(req);
  read_inputs(p, req);
  return p;
}

void require_tokenizer_fits(const Tokenizer& tok, const std::string& tokenizer_file, int64_t vocab_size) {
  if (tok.vocab_size() > vocab_size)
    throw UserError("the tokenizer " + tokenizer_file + " has " + std::to_string(tok.vocab_size()) +
                    " pieces, more than the model's vocabulary (model.vocab_size " + std::to_string(vocab_size) +
                    "): it is not the one the model was trained with");
}

// A tokenizer of as many pieces or fewer, replaced since the pretraining (train-tokenizer run
// again), fits the vocabulary but maps every word to other ids: the checkpoint names its own.
void require_pretraining_tokenizer(const Tokenizer& tok, const std::string& tokenizer_file, const fs::path& checkpoint,
                                   const std::optional<uint32_t>& pretrained) {
  if (!pretrained) return;
  const uint32_t ours = tokenizer_crc32(tok);
  if (*pretrained == ours) return;
  throw UserError(fmt::format("{}: not the tokenizer {} was pretrained with (CRC-32 of its pieces {:08x}, the "
                              "checkpoint's {:08x}): its ids would mean other pieces; use the tokenizer of that run",
                              tokenizer_file, checkpoint.string(), ours, *pretrained));
}

void read_inputs(Prepared& p, const FinetuneRequest& req) {
  auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  p.tok = make_tokenizer(cfg.data, default_run_folder(cfg) / "tokenizer.model");
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = p.tok->vocab_size();
  require_tokenizer_fits(*p.tok, cfg.data.tokenizer_model, cfg.model.vocab_size);
  require_pretraining_tokenizer(*p.tok, cfg.data.tokenizer_model, p.rc.checkpoint, p.rc.pretrained_tokenizer_crc);
  p.squad = f.task == "squad";
  require(!f.token_types || cfg.model.type_vocab_size >= 2,
          "finetune.token_types: pairs need model.type_vocab_size >= 2 (got " +
              std::to_string(cfg.model.type_vocab_size) + "); set finetune.token_types: false");
  if (req.kind == "glue" && p.squad)
    throw UserError(req.config_file.string() + ": finetune.task is squad; pass --task NAME for a GLUE task");
  if (p.squad) read_squad_inputs(p);
  else read_glue_inputs(p);
}

int64_t longest_input(const Prepared& p) {
  int64_t longest = 0;
  for (const auto& x : p.train_f) longest = std::max<int64_t>(longest, x.ids.size());
  for (const auto& x : p.dev_f) longest = std::max<int64_t>(longest, x.ids.size());
  for (const auto& x : p.train_ids) longest = std::max<int64_t>(longest, x.size());
  for (const auto& s : p.dev)
    for (const auto& x : s.ids) longest = std::max<int64_t>(longest, x.size());
  return longest;
}

void load_encoder(BertModel& bert, const Prepared& p, int64_t longest, bool report) {
  // Through the method-swap loader: identical to a plain load when the methods agree, and
  // the paper's section 4.4 recipe (new position parameters start neutral) when the
  // fine-tuning config names another method than the pretrained run.
  if (!p.rc.checkpoint.empty()) {
    SwapOptions options = swap_options_from(p.rc.cfg.init);
    options.report = options.verify = report;  // every seed loads the same: checked and said once
    const SwapReport r = load_pretrained_encoder(*bert, p.rc.checkpoint, options);
    if (report && (!r.added.empty() || !r.dropped.empty()))
      log::info("finetune", "method swap: {} tensors loaded, {} added, {} dropped (probe max logit change {:.2e})",
                r.loaded.size(), r.added.size(), r.dropped.size(), r.probe_max_diff);
  }
  // A learned absolute table refuses lengths beyond max_position: said with the fine-tuning key
  // that sets the windows' length, before any training.
  try {
    bert->position->input_embeddings(longest);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + "; fine-tuning windows are at most finetune.max_seq_len tokens: " +
                    "--set finetune.max_seq_len=" + std::to_string(p.rc.cfg.model.max_position) + " or less");
  }
}

}  // namespace rpe::finetune
