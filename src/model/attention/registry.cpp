// The registry, filled in one place. Adding a method = its .cpp (defining
// make_position_method_<name>), one entry below stating its facts, a config fragment in
// configs/attention/<name>.yaml and a test. Nothing else names methods: presets, the CLI's
// listing, scripts, HF interop, method swap and fine-tuning ask these entries.
#include "model/attention/registry.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "model/attention/position_method.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {

#define RPE_DECLARE(name) std::shared_ptr<PositionMethodImpl> make_position_method_##name(const ModelOptions&);
RPE_DECLARE(absolute)
RPE_DECLARE(sinusoid)
RPE_DECLARE(shaw)
RPE_DECLARE(transformer_xl)
RPE_DECLARE(m1)
RPE_DECLARE(m2)
RPE_DECLARE(m3)
RPE_DECLARE(m4)
RPE_DECLARE(t5_bias)
RPE_DECLARE(alibi)
RPE_DECLARE(rope)
RPE_DECLARE(deberta)
#undef RPE_DECLARE

namespace {

// Sizes the parameter counts below are written in (each method's file documents its tables).
struct Sizes {
  double D, L, H, d, k, table_heads;
  explicit Sizes(const ModelOptions& m)
      : D(static_cast<double>(m.hidden)), L(static_cast<double>(m.layers)), H(static_cast<double>(m.heads)),
        d(D / H), k(static_cast<double>(m.attention.max_relative > 0 ? m.attention.max_relative : m.max_position - 1)),
        table_heads(m.attention.share_across_heads ? 1.0 : H) {}
};

double no_tables(const ModelOptions&) { return 0.0; }
double shaw_tables(const ModelOptions& m) {  // key (and value) tables [H|1, 2k+1, d] per layer
  const Sizes s(m);
  return s.L * s.table_heads * (2 * s.k + 1) * s.d * (m.attention.shaw_values ? 2 : 1);
}
double vector_tables(const ModelOptions& m) {  // m3, m4: [H|1, 2k+1, d] per layer
  const Sizes s(m);
  return s.L * s.table_heads * (2 * s.k + 1) * s.d;
}
double unsigned_scalars(const ModelOptions& m) {  // m1: [H|1, k+1] per layer
  const Sizes s(m);
  return s.L * s.table_heads * (s.k + 1);
}
double signed_scalars(const ModelOptions& m) {  // m2: [H|1, 2k+1] per layer
  const Sizes s(m);
  return s.L * s.table_heads * (2 * s.k + 1);
}
double xl_tables(const ModelOptions& m) {  // W^R [D, D], u, v [H, d] per layer (xl_uv_bias)
  const Sizes s(m);
  return s.L * (s.D * s.D + (m.attention.xl_uv_bias ? 2 * s.D : 0.0));
}
double deberta_tables(const ModelOptions& m) {  // W^{K,r}, W^{Q,r} [D, D] per layer, P [2k+1 | 2b+1, D]
  const Sizes s(m);
  const double b = static_cast<double>(m.attention.position_buckets);
  return s.L * 2 * s.D * s.D + (2 * (b > 0 ? b : s.k) + 1) * s.D;
}
double t5_table(const ModelOptions& m) {  // [buckets, H|1] shared by the layers
  return static_cast<double>(m.attention.t5_buckets) * Sizes(m).table_heads;
}

MethodFacts::Problem rope_problem(const ModelOptions& m) {
  const int64_t d = m.hidden / m.heads;
  return {"model.attention.method", d % 2 == 0 ? "" : "rope needs an even head size, got " + std::to_string(d)};
}
// T5's buckets: half per direction, of which half exact (distances below buckets / 4), the
// rest logarithmic up to max_distance, which must lie beyond the exact ones.
MethodFacts::Problem t5_problem(const ModelOptions& m) {
  const auto& a = m.attention;
  if (a.t5_buckets < 4) return {"model.attention.t5_buckets", "must be at least 4, got " + std::to_string(a.t5_buckets)};
  if (a.t5_max_distance <= a.t5_buckets / 4)
    return {"model.attention.t5_max_distance", "must exceed t5_buckets / 4 = " + std::to_string(a.t5_buckets / 4) +
                                                   " (where the exact buckets end), got " +
                                                   std::to_string(a.t5_max_distance)};
  return {};
}
// DeBERTa v2's log buckets: b / 2 exact distances per direction (b even, as transformers'
// configs have it), the rest logarithmic up to k, which must lie beyond the exact ones. With
// max_relative at its default (0: k = max_position - 1) the rule is on position_buckets.
MethodFacts::Problem deberta_problem(const ModelOptions& m) {
  const auto& a = m.attention;
  if (a.position_buckets == 0) return {};
  if (a.position_buckets < 4 || a.position_buckets % 2 != 0)
    return {"model.attention.position_buckets", "must be 0 (clipped distances) or an even number of at least 4, got " +
                                                    std::to_string(a.position_buckets)};
  const auto k = static_cast<int64_t>(Sizes(m).k);
  if (k <= a.position_buckets / 2) {
    if (a.max_relative == 0)
      return {"model.attention.position_buckets", "the exact buckets (" + std::to_string(a.position_buckets / 2) +
                                                      " a side) must end before the log ones, at k = max_position - 1 = " +
                                                      std::to_string(k) + " (or set max_relative)"};
    return {"model.attention.max_relative", "where the log buckets end, k = " + std::to_string(k) +
                                                ", must exceed position_buckets / 2 = " +
                                                std::to_string(a.position_buckets / 2) + " (where the exact ones end)"};
  }
  return {};
}
std::string shaw_hf_problem(const AttentionOptions& a) {
  return a.shaw_values ? "model.attention.shaw_values is true but HF relative_key has no value embeddings" : "";
}

MethodInfo entry(std::string name, std::string summary, std::shared_ptr<PositionMethodImpl> (*factory)(const ModelOptions&),
                 double (*parameters)(const ModelOptions&)) {
  MethodInfo m;
  m.name = std::move(name);
  m.summary = std::move(summary);
  m.factory = factory;
  m.position_parameters = parameters;
  return m;
}

// One entry per method, in the order the paper presents them.
std::vector<MethodInfo> build_registry() {
  std::vector<MethodInfo> r;
  auto add = [&r](MethodInfo m, auto&& facts) {
    facts(m);
    r.push_back(std::move(m));
  };
  add(entry("absolute", "learned absolute embeddings added to the input (BERT; the paper's eq. 6)",
            make_position_method_absolute, no_tables),
      [](MethodInfo& m) { m.learned_absolute = true; m.hf_type = "absolute"; });
  add(entry("sinusoid", "fixed sinusoidal encodings added to the input (Vaswani et al. 2017; eqs. 1-2)",
            make_position_method_sinusoid, no_tables),
      [](MethodInfo&) {});
  add(entry("shaw", "relative embeddings on the keys (and values), clipped at k (Shaw et al. 2018; eqs. 7-9)",
            make_position_method_shaw, shaw_tables),
      [](MethodInfo& m) {
        m.clipped = true; m.hf_type = "relative_key"; m.hf_distance_table = "key_table";
        m.hf_problem = shaw_hf_problem; m.distance_table = DistanceTable::signed_rows;
      });
  add(entry("transformer_xl", "projected sinusoidal relative encodings with u/v biases (Dai et al. 2019; eq. 10)",
            make_position_method_transformer_xl, xl_tables),
      [](MethodInfo& m) { m.clipped = true; m.unclipped_at_zero = true; m.distance_table = DistanceTable::mirrored_rows; });
  add(entry("m1", "method 1: a learned scalar per distance |j-i| gates q.k (Huang et al. 2020; eqs. 11-12)",
            make_position_method_m1, unsigned_scalars),
      [](MethodInfo& m) {
        m.aliases = {"method1"}; m.clipped = true; m.zero_is_neutral = false;
        m.distance_table = DistanceTable::unsigned_scalars;
      });
  add(entry("m2", "method 2: a learned scalar per signed distance j-i gates q.k (Huang et al. 2020; eq. 13)",
            make_position_method_m2, signed_scalars),
      [](MethodInfo& m) {
        m.aliases = {"method2"}; m.clipped = true; m.zero_is_neutral = false;
        m.distance_table = DistanceTable::signed_scalars;
      });
  add(entry("m3", "method 3: a learned vector per distance gates q.k elementwise (Huang et al. 2020; eqs. 14-15)",
            make_position_method_m3, vector_tables),
      [](MethodInfo& m) {
        m.aliases = {"method3"}; m.clipped = true; m.zero_is_neutral = false;
        m.distance_table = DistanceTable::signed_rows;
      });
  add(entry("m4", "method 4: q.w + k.w relative terms added to q.k, the paper's best (Huang et al. 2020; eqs. 16-17)",
            make_position_method_m4, vector_tables),
      [](MethodInfo& m) {
        m.aliases = {"method4"}; m.clipped = true; m.hf_type = "relative_key_query"; m.hf_distance_table = "w";
        m.distance_table = DistanceTable::signed_rows;
      });
  add(entry("t5_bias", "a learned bias per log-bucketed distance, shared by the layers (Raffel et al. 2019)",
            make_position_method_t5_bias, t5_table),
      [](MethodInfo& m) { m.config_problem = t5_problem; });
  add(entry("alibi", "fixed linear distance penalties per head, symmetric (Press et al. 2021)",
            make_position_method_alibi, no_tables),
      [](MethodInfo&) {});
  add(entry("rope", "rotary embedding of queries and keys (Su et al. 2021)", make_position_method_rope, no_tables),
      [](MethodInfo& m) { m.config_problem = rope_problem; });
  add(entry("deberta", "disentangled content-to-position and position-to-content terms (He et al. 2020)",
            make_position_method_deberta, deberta_tables),
      [](MethodInfo& m) {
        m.clipped = true; m.distance_table = DistanceTable::mirrored_shared; m.config_problem = deberta_problem;
        m.zero_is_neutral = false;  // its 1/sqrt(3d) scale changes q.k whatever its tables hold
      });
  return r;
}

// The config layer's view of the same entries, filled before main() runs.
[[maybe_unused]] const bool kCatalogueFilled = [] {
  for (const MethodInfo& m : position_methods()) method_catalogue().push_back(&m);
  return true;
}();

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

const std::vector<MethodInfo>& position_methods() {
  static const std::vector<MethodInfo> methods = build_registry();
  return methods;
}

const MethodInfo* find_method(const std::string& name) {
  for (const MethodInfo& m : position_methods()) {
    if (m.name == name) return &m;
    if (std::find(m.aliases.begin(), m.aliases.end(), name) != m.aliases.end()) return &m;
  }
  return nullptr;
}

const MethodInfo& method_info(const std::string& name) {
  if (const MethodInfo* m = find_method(name)) return *m;
  throw UserError("model.attention.method: unknown method '" + name + "' (valid: " + join(attention_method_names()) +
                  ")");
}

bool has_absolute_table(const ModelOptions& m) {
  return method_info(m.attention.method).learned_absolute || m.attention.add_absolute;
}

std::vector<std::string> attention_method_names() {
  std::vector<std::string> names;
  for (const MethodInfo& m : position_methods()) names.push_back(m.name);
  return names;
}

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
  const MethodInfo& info = method_info(options.attention.method);
  // The entry's own rules, as config validation applies them, for models built from options
  // that never went through a config file (tests, HF imports): the methods need not repeat them.
  if (info.config_problem)
    if (const MethodFacts::Problem p = info.config_problem(options); !p.message.empty())
      throw UserError(p.key + ": " + p.message);
  auto method = info.factory(options);
  for (const auto& key : unused_attention_options(*method, options.attention))
    log::warn("model", "model.attention.{} is set but {} does not use it (ignored)", key, info.name);
  return method;
}

std::vector<std::string> method_option_keys(const std::string& method_name) {
  ModelOptions small;  // a size every method accepts; the keys do not depend on it
  small.hidden = 16; small.heads = 2; small.layers = 1; small.ffn = 16; small.max_position = 8; small.vocab_size = 16;
  small.attention.method = method_info(method_name).name;
  return method_info(method_name).factory(small)->option_keys();
}

}  // namespace rpe
