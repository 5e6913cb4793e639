// Small BERT model options shared by the tests (see test_models.h).
#include "test_models.h"

#include <algorithm>

#include "model/attention/registry.h"

namespace rpe::test {

ModelOptions small_model_options(const std::string& method, const SmallSizes& sizes) {
  ModelOptions o;
  o.vocab_size = sizes.vocab;
  o.hidden = sizes.hidden;
  o.layers = sizes.layers;
  o.heads = sizes.heads;
  o.ffn = sizes.ffn;
  o.max_position = sizes.max_position;
  if (sizes.dropout) o.dropout = o.attention_dropout = *sizes.dropout;
  o.attention.method = method;
  return o;
}

bool method_registered(const std::string& method) {
  const auto names = attention_method_names();
  return std::find(names.begin(), names.end(), method) != names.end();
}

}  // namespace rpe::test
