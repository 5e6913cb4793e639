// rpe-train inspect: looks inside a pretrained run or checkpoint for the paper's figures.
//   --position-weights OUT  Figure 4: one layer/head's learned relative table at distances
//                           j - i = -D..D (D = --max-distance, default 50), read per method
//                           (cli/inspect_weights.h); distances beyond k read the edge row, as
//                           the model does. Output [2D+1, d] ([2D+1, 1] for m1/m2's scalars).
//   --attention OUT         Figure 5: softmax attention probabilities of one layer (default
//                           the first) averaged over heads, for the first --tokens (50) pieces
//                           of "[CLS] text [SEP]": mean_h P[0, h] -> [T, T].
//   --mlm-loss OUT.json     Length extrapolation: held-out MLM cross-entropy (mean over masked
//                           pieces, the pretraining masking) of --eval-file packed at each of
//                           --lengths; null with the reason where the method refuses a length.
//   --max-length            Prints the longest sequence the model takes (the rows of a learned
//                           absolute table), or "none" when it takes any length.
// OUT ending in .npy gets a float32 NumPy array (format 1.0); anything else gets JSON with the
// labels (distances or token pieces) beside the numbers.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/inspect_weights.h"
#include "cli/output_paths.h"
#include "config/config.h"
#include "data/corpus.h"
#include "data/masking.h"
#include "data/mlm_dataset.h"
#include "data/packing.h"
#include "data/tokenizer.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/mlm_task.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
struct InspectArgs {
  std::string run, weights_out, attention_out, text, text_file;
  int64_t layer = 0, head = 0, max_distance = 50, attention_layer = 0, tokens = 50;
  std::string mlm_out, eval_file, lengths = "128";
  int64_t eval_sequences = 64;
  bool max_length = false;
};

// Mean MLM cross-entropy over the masked pieces of up to `max_sequences` sequences of length L.
json mlm_loss_at(BertModel& bert, const Tokenizer& tok, const Config& cfg, const std::vector<Document>& docs,
                 int64_t L, int64_t max_sequences) {
  auto packed = std::make_shared<PackedSequences>(pack_documents(docs, tok, L, Packing::full_sentences));
  const int64_t batch = 8;
  const int64_t batches = std::min(packed->size(), max_sequences) / batch;
  if (batches == 0) return {{"length", L}, {"loss", nullptr}, {"why", "fewer than 8 sequences of this length"}};
  try {
    bert->position->input_embeddings(L);  // a learned absolute table refuses L > max_position
  } catch (const UserError& e) {
    return {{"length", L}, {"loss", nullptr}, {"why", e.what()}};
  }
  MlmLoader loader(packed, tok, {MaskingOptions::from(cfg.data), batch, /*seed=*/1, /*shuffle=*/false});
  double loss_sum = 0.0;
  int64_t total = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const auto mb = loader.next();
    const auto sel = mlm_selection(mb.labels);  // the training loss's own function (train/mlm_task.h)
    loss_sum += mlm_loss(bert, mb.ids, mb.padding, sel.index, sel.targets).loss.item<double>();
    total += sel.index.size(0);
  }
  return {{"length", L}, {"loss", loss_sum / std::max<int64_t>(1, total)}, {"masked", total}, {"sequences", batches * batch}};
}

// A 2-D float32 array as NumPy's .npy v1.0: magic, header dict padded to 64 bytes, raw data.
std::string to_npy(const torch::Tensor& m) {
  auto t = m.to(torch::kFloat32).contiguous().cpu();
  std::ostringstream shape;
  shape << "(" << t.size(0) << ", " << t.size(1) << ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape.str() + ", }";
  const size_t unpadded = 10 + header.size() + 1;  // magic(6) + version(2) + length(2) + header + '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(t.data_ptr<float>()), static_cast<size_t>(t.numel()) * sizeof(float));
  return out;
}

json matrix_json(const torch::Tensor& m) {
  auto t = m.to(torch::kFloat64).contiguous().cpu();
  json rows = json::array();
  for (int64_t i = 0; i < t.size(0); ++i) {
    json row = json::array();
    for (int64_t j = 0; j < t.size(1); ++j) row.push_back(t[i][j].item<double>());
    rows.push_back(std::move(row));
  }
  return rows;
}

// `out`, the file `option` names: the matrix `m` as .npy, or in JSON as meta[key].
void write_output(const std::string& option, const std::string& out, const torch::Tensor& m, json meta,
                  const char* key) {
  write_output_into(option + " " + out, fs::path(out).parent_path(), [&] {
    if (fs::path(out).extension() == ".npy") {
      write_file_atomic(out, to_npy(m));
    } else {
      meta[key] = matrix_json(m);
      write_file_atomic(out, dump_json(meta) + "\n");  // the run's path, not always UTF-8
    }
  });
  std::cout << "wrote " << out << " [" << m.size(0) << ", " << m.size(1) << "]\n";
}

// An output is replaced where it exists (the reproduction scripts write their figures' data
// again), so one that names something else is refused before anything is written: a file of
// another kind than inspect writes (a checkpoint, a corpus: .json, or .npy where allowed), an
// input of this command, or a file in the run's checkpoints/ folder.
void check_inspect_output(const std::string& option, const std::string& out, const InspectArgs& a, bool npy) {
  check_output_file(option, out);
  const auto ext = fs::path(out).extension();
  if (ext != ".json" && !(npy && ext == ".npy"))
    throw UserError(option + " " + out + ": expected a .json" + (npy ? " or .npy" : "") + " file name");
  const auto key = same_file_key(out);
  for (const std::string& input : {a.run, a.eval_file, a.text_file})
    if (!input.empty() && same_file_key(input) == key)
      throw UserError(option + " " + out + ": is an input of this command (" + input + "); choose another name");
  const auto run = same_file_key(fs::is_regular_file(a.run) ? fs::path(a.run).parent_path().parent_path() : fs::path(a.run));
  if (key.parent_path() == run / "checkpoints")
    throw UserError(option + " " + out + ": inside the run's checkpoints folder; choose another folder");
}

// Checks the options before anything is loaded (a bad path fails fast); returns --lengths.
std::vector<int64_t> check_inspect_args(const InspectArgs& a) {
  if (a.weights_out.empty() && a.attention_out.empty() && a.mlm_out.empty() && !a.max_length)
    throw UserError("inspect: nothing to do: pass --position-weights, --attention, --mlm-loss and/or --max-length");
  std::vector<int64_t> lengths;
  if (!a.mlm_out.empty()) {
    if (a.eval_file.empty()) throw UserError("--mlm-loss needs --eval-file (a text corpus, as data.train_files)");
    std::stringstream in(a.lengths);
    std::string item;
    while (std::getline(in, item, ',')) {
      size_t used = 0;
      try {
        lengths.push_back(std::stoll(item, &used));
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size())  // "16x" is no length
        throw UserError("--lengths " + a.lengths + ": expected comma-separated integers, e.g. 64,128,256");
      if (lengths.back() < 8) throw UserError("--lengths: each length must be at least 8");
    }
    if (a.eval_sequences < 8)
      throw UserError("--eval-sequences must be at least 8 (one batch), got " + std::to_string(a.eval_sequences));
  }
  if (a.max_distance < 0) throw UserError("--max-distance must be >= 0");
  if (a.max_distance > 1000000) throw UserError("--max-distance must be at most 1000000");
  // Outputs are checked before the model is loaded: a bad path fails fast.
  if (!a.weights_out.empty()) check_inspect_output("--position-weights", a.weights_out, a, true);
  if (!a.attention_out.empty()) check_inspect_output("--attention", a.attention_out, a, true);
  if (!a.mlm_out.empty()) check_inspect_output("--mlm-loss", a.mlm_out, a, false);
  if (a.tokens < 2) throw UserError("--tokens must be at least 2");
  return lengths;
}

// Figure 4: --layer/--head's relative table at distances -D..D.
void write_position_weights(const InspectArgs& a, BertModel& bert, const std::string& method) {
  const int64_t n_layers = static_cast<int64_t>(bert->layers->size());
  if (a.layer < 0 || a.layer >= n_layers)
    throw UserError("--layer " + std::to_string(a.layer) + ": the model has " + std::to_string(n_layers) + " layers (0-based)");
  auto layer = bert->layers[a.layer]->as<EncoderLayerImpl>();
  const auto w = weights_by_distance(layer->attention->position->position_weights(), method, a.head, a.max_distance);
  std::vector<int64_t> distances;
  for (int64_t d = -a.max_distance; d <= a.max_distance; ++d) distances.push_back(d);
  write_output("--position-weights", a.weights_out, w,
               {{"run", a.run}, {"method", method}, {"layer", a.layer}, {"head", a.head}, {"distances", distances}},
               "weights");
}

// Figure 5: --attention-layer's probabilities on "[CLS] text [SEP]", averaged over heads.
void write_attention(const InspectArgs& a, BertModel& bert, const Tokenizer& tok, const Config& cfg) {
  std::string text = a.text;
  if (!a.text.empty() && !a.text_file.empty()) throw UserError("--text and --text-file: give one");
  if (!a.text_file.empty()) {
    try {
      text = read_file(a.text_file);  // a regular file only: a FIFO would wait for a writer
    } catch (const UserError& e) {
      throw UserError(std::string("--text-file: ") + e.what());
    }
  }
  if (text.empty()) throw UserError("--attention needs --text or --text-file");
  if (a.attention_layer < 0 || a.attention_layer >= static_cast<int64_t>(bert->layers->size()))
    throw UserError("--attention-layer " + std::to_string(a.attention_layer) + ": the model has " +
                    std::to_string(bert->layers->size()) + " layers (0-based)");
  const auto enc = tok.encode_corpus(text);  // the model read text as pretraining did
  std::vector<int64_t> ids{tok.special().cls};
  for (auto id : enc.ids) ids.push_back(id);
  ids.push_back(tok.special().sep);
  const int64_t limit = std::min<int64_t>({a.tokens, static_cast<int64_t>(ids.size()), cfg.model.max_position});
  if (limit < static_cast<int64_t>(ids.size()))
    log::info("inspect", "--attention: the first {} of {} pieces of [CLS] text [SEP] (--tokens {}, model.max_position {})",
              limit, ids.size(), a.tokens, cfg.model.max_position);
  ids.resize(limit);
  std::vector<std::string> pieces;
  for (auto id : ids) pieces.push_back(tok.piece(static_cast<int32_t>(id)));
  auto x = torch::tensor(ids, torch::kLong).unsqueeze(0);  // [1, T]
  auto pad = torch::zeros({1, limit}, torch::kBool);       // no padding
  bert->set_fused_attention(false);                        // capture needs the plain path
  bert->capture_attention(a.attention_layer);
  bert->encode(x, pad);
  const auto probs = bert->captured_attention();  // [1, H, T, T]
  if (!probs.defined()) throw UserError("inspect: layer " + std::to_string(a.attention_layer) + " captured nothing");
  write_output("--attention", a.attention_out, probs[0].mean(0),
               {{"run", a.run}, {"method", cfg.model.attention.method}, {"layer", a.attention_layer},
                {"heads", cfg.model.heads}, {"tokens", pieces}, {"ids", ids}},
               "attention");
}

// Length extrapolation: the held-out MLM loss of --eval-file at each length.
void write_mlm_losses(const InspectArgs& a, BertModel& bert, const Tokenizer& tok, const Config& cfg,
                      const std::vector<int64_t>& lengths) {
  const auto docs = read_documents(a.eval_file);
  json rows = json::array();
  for (auto L : lengths) {
    rows.push_back(mlm_loss_at(bert, tok, cfg, docs, L, a.eval_sequences));
    std::cout << "MLM loss at length " << L << ": " << rows.back()["loss"].dump() << "\n";
  }
  const std::string text = dump_json(json{{"run", a.run},
                                           {"method", cfg.model.attention.method},
                                           {"pretrain_max_len", cfg.data.max_seq_len},
                                           {"eval_file", a.eval_file},
                                           {"mlm_loss", rows}}) +  // paths, not always UTF-8
                           "\n";
  write_output_into("--mlm-loss " + a.mlm_out, fs::path(a.mlm_out).parent_path(),
                    [&] { write_file_atomic(a.mlm_out, text); });
}

}  // namespace

int run_inspect(const InspectArgs& a) {
  const std::vector<int64_t> lengths = check_inspect_args(a);
  const bool only_max_length = a.max_length && a.weights_out.empty() && a.attention_out.empty() && a.mlm_out.empty();
  if (only_max_length) silence_logs();  // stdout is one word scripts read
  const CheckpointSource source = resolve_checkpoint(a.run);
  const fs::path &checkpoint = source.checkpoint, &run_dir = source.run_dir;
  Config cfg = config_from_yaml(read_checkpoint_config(checkpoint), checkpoint.string() + " (embedded config)");
  if (a.max_length) {  // from the config alone: no weights or tokenizer needed
    std::cout << (has_absolute_table(cfg.model) ? std::to_string(cfg.model.max_position) : std::string("none")) << "\n";
    if (only_max_length) return 0;
  }
  const fs::path tok_path = run_dir / "tokenizer.model";
  if (cfg.data.tokenizer == "sentencepiece" && cfg.data.tokenizer_model.empty() && !fs::exists(tok_path))
    throw UserError(a.run + ": the run's tokenizer " + tok_path.string() + " is missing");
  auto tok = make_tokenizer(cfg.data, tok_path);
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = tok->vocab_size();
  BertModel bert(cfg.model);
  load_checkpoint(checkpoint, *bert, nullptr);
  bert->eval();
  torch::NoGradGuard no_grad;
  if (!a.weights_out.empty()) write_position_weights(a, bert, cfg.model.attention.method);
  if (!a.attention_out.empty()) write_attention(a, bert, *tok, cfg);
  if (!a.mlm_out.empty()) write_mlm_losses(a, bert, *tok, cfg, lengths);
  return 0;
}

void add_inspect(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("inspect", "Write learned position weights / first-layer attention of a run (Figures 4, 5)");
  auto a = std::make_shared<InspectArgs>();
  cmd->add_option("run", a->run, "Pretrained run folder or checkpoint file")->required();
  cmd->add_option("--position-weights", a->weights_out, "Output (.json or .npy): the table at distances -D..D");
  cmd->add_option("--layer", a->layer, "Layer of --position-weights (0-based, default 0)");
  cmd->add_option("--head", a->head, "Head of --position-weights (default 0; ignored for shared tables)");
  cmd->add_option("--max-distance", a->max_distance, "D for --position-weights (default 50)");
  cmd->add_option("--attention", a->attention_out, "Output (.json or .npy): head-averaged attention probabilities");
  cmd->add_option("--attention-layer", a->attention_layer, "Layer of --attention (default 0, the first)");
  cmd->add_option("--text", a->text, "Text for --attention");
  cmd->add_option("--text-file", a->text_file, "File with the text for --attention");
  cmd->add_option("--tokens", a->tokens, "Pieces of [CLS] text [SEP] to keep (default 50)");
  cmd->add_option("--mlm-loss", a->mlm_out, "Output JSON: MLM loss of --eval-file at each of --lengths");
  cmd->add_option("--eval-file", a->eval_file, "Text corpus for --mlm-loss");
  cmd->add_option("--lengths", a->lengths, "Comma-separated sequence lengths for --mlm-loss (default 128)");
  cmd->add_option("--eval-sequences", a->eval_sequences, "Sequences per length for --mlm-loss (default 64)");
  cmd->add_flag("--max-length", a->max_length,
                "Print the longest sequence the model takes (its learned absolute table's rows), or \"none\"");
  cmd->callback([&run, a] { run = [a] { return run_inspect(*a); }; });
}

}  // namespace rpe::cli
