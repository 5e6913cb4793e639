// The registry, filled in one place. Adding a method = its .cpp (defining
// make_position_method_<name>), one entry in RPE_POSITION_METHODS, a config fragment
// in configs/attention/ and a test.
#include "model/attention/registry.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "model/attention/position_method.h"
#include "util/errors.h"
#include "util/log.h"

// X-macro: one line per method, in the order the paper presents them.
#define RPE_POSITION_METHODS(X) \
  X(absolute)                   \
  X(sinusoid)                   \
  X(shaw)                       \
  X(transformer_xl)             \
  X(m1)                         \
  X(m2)                         \
  X(m3)                         \
  X(m4)                         \
  X(t5_bias)                    \
  X(alibi)                      \
  X(rope)                       \
  X(deberta)

namespace rpe {

#define RPE_DECLARE(name) std::shared_ptr<PositionMethodImpl> make_position_method_##name(const ModelOptions&);
RPE_POSITION_METHODS(RPE_DECLARE)
#undef RPE_DECLARE

namespace {
using Factory = std::shared_ptr<PositionMethodImpl> (*)(const ModelOptions&);

const std::vector<std::pair<std::string, Factory>>& registry() {
#define RPE_ENTRY(name) {#name, &make_position_method_##name},
  static const std::vector<std::pair<std::string, Factory>> table{RPE_POSITION_METHODS(RPE_ENTRY)};
#undef RPE_ENTRY
  return table;
}
}  // namespace

std::vector<std::string> attention_method_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

std::vector<std::string> unused_attention_options(const PositionMethodImpl& method, const AttentionOptions& a) {
  const AttentionOptions d;  // defaults
  const std::pair<const char*, bool> changed[] = {
      {"max_relative", a.max_relative != d.max_relative},
      {"share_across_heads", a.share_across_heads != d.share_across_heads},
      {"shaw_values", a.shaw_values != d.shaw_values},
      {"xl_uv_bias", a.xl_uv_bias != d.xl_uv_bias},
      {"t5_buckets", a.t5_buckets != d.t5_buckets},
      {"t5_max_distance", a.t5_max_distance != d.t5_max_distance},
      {"rope_base", a.rope_base != d.rope_base},
  };
  const auto keys = method.option_keys();
  std::vector<std::string> unused;
  for (const auto& [key, differs] : changed)
    if (differs && std::find(keys.begin(), keys.end(), key) == keys.end()) unused.emplace_back(key);
  return unused;
}

std::shared_ptr<PositionMethodImpl> make_position_method(const ModelOptions& options) {
  for (const auto& [name, factory] : registry())
    if (name == options.attention.method) {
      auto method = factory(options);
      for (const auto& key : unused_attention_options(*method, options.attention))
        log::warn("model", "model.attention.{} is set but {} does not use it (ignored)", key, name);
      return method;
    }
  throw UserError("model.attention.method: unknown method '" + options.attention.method +
                  "' (valid: " + join(attention_method_names()) + ")");
}

}  // namespace rpe
