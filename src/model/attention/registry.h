// Registry of position methods keyed by their YAML name (model.attention.method), and the
// facts about each method that code outside attention/ needs (presets, CLI listing, HF
// export/import, method swap, clipping distance, length rules): those callers ask here
// rather than naming methods. The config-layer part of the facts (config/method_catalogue.h)
// is filled from this registry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/method_catalogue.h"

namespace rpe {

class PositionMethodImpl;

// How a method's learned position table (PositionTermImpl::position_weights) is laid out by
// relative distance, for Figure 4's reading (cli/inspect_weights.h):
enum class DistanceTable {
  none,              // no one-row-per-distance table (absolute, fixed methods, T5's buckets)
  unsigned_scalars,  // [H|1, k+1], slot min(|j-i|, k)                 (m1)
  signed_scalars,    // [H|1, 2k+1], slot clip(j-i, k) + k              (m2)
  signed_rows,       // [H|1, 2k+1, d], slot clip(j-i, k) + k           (m3, m4, shaw)
  mirrored_rows,     // [H, 2k+1, d], slot clip(i-j, k) + k             (transformer_xl)
  mirrored_shared,   // [2k+1, D] for all heads, slot clip(i-j, k) + k  (deberta)
};

struct MethodInfo : MethodFacts {
  // Hugging Face BertConfig.position_embedding_type this method exports as and is imported
  // from; "" = no HF BERT equivalent.
  std::string hf_type;
  // Our per-layer parameter that HF calls distance_embedding ("" = none).
  std::string hf_distance_table;
  // Method options HF BERT cannot express (a message, "" = exportable), beyond the general
  // rules in interop/hf_bert.cpp.
  std::string (*hf_problem)(const AttentionOptions&) = nullptr;
  DistanceTable distance_table = DistanceTable::none;
  std::shared_ptr<PositionMethodImpl> (*factory)(const ModelOptions&) = nullptr;
};

// Every method, in registry order (the order the paper presents them).
const std::vector<MethodInfo>& position_methods();

// The method named `name` or one of its aliases; nullptr when none.
const MethodInfo* find_method(const std::string& name);

// As find_method, but a UserError for model.attention.method naming the valid names.
const MethodInfo& method_info(const std::string& name);

// Whether a model of `m` keeps a learned absolute table (the method's own, or add_absolute):
// model.max_position rows, so no longer sequence (and a tensor to export or swap).
bool has_absolute_table(const ModelOptions& m);

// Names in registry order; an unknown name in a config is an error listing these.
std::vector<std::string> attention_method_names();

// Builds the method named by options.attention.method (UserError if unknown), warning
// once per model.attention key set away from its default that the method does not read.
std::shared_ptr<PositionMethodImpl> make_position_method(const ModelOptions& options);

// The model.attention keys with a non-default value that `method` does not read.
std::vector<std::string> unused_attention_options(const PositionMethodImpl& method, const AttentionOptions& options);

// The model.attention keys `method_name` reads besides method/add_absolute/backend (asked
// of the method itself, built at a small size).
std::vector<std::string> method_option_keys(const std::string& method_name);

}  // namespace rpe
