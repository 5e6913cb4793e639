// The registry, filled in one place. Adding a method = its .cpp (defining
// make_position_method_<name>), one entry in RPE_POSITION_METHODS, a config fragment
// in configs/attention/ and a test.
#include "model/attention/registry.h"

#include <functional>
#include <utility>

#include "model/attention/position_method.h"
#include "util/errors.h"

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

std::shared_ptr<PositionMethodImpl> make_position_method(const ModelOptions& options) {
  for (const auto& [name, factory] : registry())
    if (name == options.attention.method) return factory(options);
  throw UserError("model.attention.method: unknown method '" + options.attention.method +
                  "' (valid: " + join(attention_method_names()) + ")");
}

}  // namespace rpe
