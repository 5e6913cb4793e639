// The registry, filled in one place. Adding a method = its .cpp (defining
// make_position_method_<name>), one entry in RPE_POSITION_METHODS, a config fragment
// in configs/attention/ and a test.
#include "model/attention/registry.h"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <sstream>
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

namespace {
// Every model.attention key with its value as text, in declaration order (AttentionOptions::visit).
std::vector<std::pair<std::string, std::string>> option_values(AttentionOptions options) {
  std::vector<std::pair<std::string, std::string>> out;
  auto record = [&out](const char* key, const auto& value, bool = false) {
    std::ostringstream text;
    text << std::setprecision(17) << value;
    out.emplace_back(key, text.str());
  };
  options.visit(record);
  return out;
}
}  // namespace

std::vector<std::string> unused_attention_options(const PositionMethodImpl& method, const AttentionOptions& a) {
  std::vector<std::string> read = method.option_keys();
  for (const char* every : {"method", "add_absolute", "backend"}) read.emplace_back(every);  // read by all
  const auto defaults = option_values(AttentionOptions{}), values = option_values(a);
  std::vector<std::string> unused;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].second != defaults[i].second &&
        std::find(read.begin(), read.end(), values[i].first) == read.end())
      unused.push_back(values[i].first);
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
