// Method swap: copy shared tensors, start new position parameters neutral, measure the
// change of function on a probe input (see method_swap.h).
#include "interop/method_swap.h"

#include <set>

#include "interop/model_file.h"
#include "model/attention/registry.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

// Parameters owned by a position method: the model-level "position." module and each
// layer's "attention.position." hooks.
bool is_position_tensor(const std::string& name) {
  return name.rfind("position.", 0) == 0 || name.find(".attention.position.") != std::string::npos;
}

// Whether zeroed new tables start the method neutral is the method's fact (its registry
// entry): multiplicative gates would lose every score, their own init is neutral instead.
bool zero_is_neutral(const std::string& method) { return method_info(method).zero_is_neutral; }

// MLM logits of a fixed probe sequence: [L, V].
torch::Tensor probe_logits(BertModelImpl& model, int64_t length) {
  const int64_t V = model.options().vocab_size;
  auto ids = (torch::arange(length, torch::kLong) * 7 + 3).remainder(V).unsqueeze(0);  // [1, L]
  auto pad = torch::zeros({1, length}, torch::kBool);
  auto hidden = model.encode(ids, pad);  // [1, L, D]
  return model.mlm_logits(hidden.squeeze(0));
}

// The attention options other than the backend (how, not what, attention computes) that differ.
std::vector<std::string> attention_changes(const AttentionOptions& from, const AttentionOptions& to) {
  Config before, after;
  before.model.attention = from;
  after.model.attention = to;
  auto changes = config_differences(before, after);
  std::erase_if(changes, [](const std::string& c) { return c.rfind("model.attention.backend:", 0) == 0; });
  return changes;
}

}  // namespace

SwapOptions swap_options_from(const InitOptions& init) {
  SwapOptions o;
  o.identity_init = init.new_position_params == "identity";
  return o;
}

SwapReport load_pretrained_encoder(BertModelImpl& model, const fs::path& checkpoint, const SwapOptions& options) {
  LoadedModel source = load_model_file(checkpoint);
  auto src = source.model->named_parameters();
  auto dst = model.named_parameters();
  SwapReport report;
  const std::string method = model.options().attention.method;
  // A position tensor means what its method makes of it: m1-m4 all name their table
  // "...position.w", but m3's near-1 gates are no m4 additive table. Across methods only the
  // learned absolute table (the same input embedding in every method) carries over. A deberta
  // table's rows mean distances, or buckets with position_buckets: as unlike as two methods.
  const auto& from = source.config.model.attention;
  const bool same_method = from.method == method && from.position_buckets == model.options().attention.position_buckets;
  auto carries_over = [&](const std::string& name) {
    return !is_position_tensor(name) || same_method || name == "position.absolute";
  };
  if (same_method) report.changed_options = attention_changes(from, model.options().attention);
  torch::NoGradGuard no_grad;
  for (auto& p : dst) {
    const std::string& name = p.key();
    const torch::Tensor* t = carries_over(name) ? src.find(name) : nullptr;
    if (t) {
      if (t->sizes() != p.value().sizes())
        throw UserError(checkpoint.string() + ": tensor " + name + " has shape " + c10::str(t->sizes()) +
                        " but the new config builds " + c10::str(p.value().sizes()));
      p.value().copy_(*t);
      report.loaded.push_back(name);
    } else if (is_position_tensor(name)) {
      // An added absolute table is an input embedding: zero leaves the function as loaded,
      // whatever the method (whose own gates or scales may start neutral by their init instead).
      if (options.identity_init && (zero_is_neutral(method) || name == "position.absolute")) p.value().zero_();
      report.added.push_back(name);
    } else {
      throw UserError(checkpoint.string() + ": tensor " + name + " is missing (not a position-method tensor: is "
                      "this checkpoint the same architecture?)");
    }
  }
  for (const auto& p : src) {
    if (dst.find(p.key()) && carries_over(p.key())) continue;
    if (!is_position_tensor(p.key()))
      throw UserError(checkpoint.string() + ": tensor " + p.key() + " has no place in the new model (not a "
                      "position-method tensor: is this checkpoint the same architecture?)");
    report.dropped.push_back(p.key());
  }

  if (options.verify && model.word_embeddings->weight.device().is_cpu()) {
    const bool was_training = model.is_training();
    model.eval();
    const int64_t L = std::min<int64_t>({16, model.options().max_position, source.config.model.max_position});
    report.probe_max_diff = (probe_logits(model, L) - probe_logits(*source.model, L)).abs().max().item<double>();
    model.train(was_training);
  }
  if (!options.report) return report;
  // An option the method does not read (rope_base of deberta) leaves the probe unchanged: no warning.
  if (!report.changed_options.empty() && report.probe_max_diff != 0.0)
    log::warn("init", "{}: the same method ({}) with other options: {}; its position tensors are loaded as they are, "
              "so the loaded model {}", checkpoint.string(), method, join(report.changed_options),
              report.probe_max_diff < 0 ? std::string("may compute another function (not probed)")
                                        : fmt::format("computes another function (probe max |logit diff| {:.2e})",
                                                      report.probe_max_diff));
  log::info("init", "{} ({}) -> {}: {} tensors loaded, {} added{}, {} dropped{}; probe max |logit diff| {}",
            checkpoint.string(), source.config.model.attention.method, method, report.loaded.size(),
            report.added.size(),
            report.added.empty() ? "" : (!options.identity_init ? " (method init)"
                                         : zero_is_neutral(method) ? " (zero)" : " (absolute table zero, others method init)"),
            report.dropped.size(), report.dropped.empty() ? "" : " (" + join(report.dropped) + ")",
            report.probe_max_diff);
  return report;
}

}  // namespace rpe
