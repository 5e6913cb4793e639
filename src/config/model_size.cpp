// Parameter count and memory estimate of a model before allocation (see model_size.h).
#include "config/model_size.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "config/method_catalogue.h"

namespace rpe {
namespace {

// Parameters of the position tables: a learned absolute table, and the method's own
// (its registry entry counts them; see each method's file).
double position_parameters(const ModelOptions& m) {
  const auto& a = m.attention;
  const MethodFacts* method = find_method_facts(a.method);
  const bool absolute = a.add_absolute || (method && method->learned_absolute);
  double p = absolute ? static_cast<double>(m.max_position) * static_cast<double>(m.hidden) : 0.0;
  if (method && method->position_parameters) p += method->position_parameters(m);
  return p;
}

}  // namespace

double estimated_parameters(const ModelOptions& m, int64_t vocab_hint) {
  const double D = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn);
  const double V = static_cast<double>(m.vocab_size > 0 ? m.vocab_size : std::max<int64_t>(vocab_hint, 0));
  const double embeddings = (V + static_cast<double>(m.type_vocab_size)) * D + 2 * D;
  const double layer = 4 * (D * D + D) + 2 * D * F + F + D + 4 * D;  // q, k, v, out; FFN; 2 LayerNorms
  const double final_norm = m.pre_ln ? 2 * D : 0.0;
  const double mlm_head = D * D + 3 * D + V;
  return embeddings + static_cast<double>(m.layers) * layer + final_norm + mlm_head + position_parameters(m);
}

double model_flops_per_token(const ModelOptions& m, int64_t vocab_hint, int64_t seq_len, double predicted) {
  const double D = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn), L = static_cast<double>(seq_len);
  const double V = static_cast<double>(m.vocab_size > 0 ? m.vocab_size : std::max<int64_t>(vocab_hint, 0));
  const double layer = 6 * (4 * D * D + 2 * D * F) + 12 * L * D;  // q, k, v, out and FFN; QK^T and PV
  return static_cast<double>(m.layers) * layer + 6 * predicted * (D * D + D * V);
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string model_memory_problem(const ModelOptions& m, int64_t vocab_hint, const std::string& keys) {
  const double params = estimated_parameters(m, vocab_hint);
  const double need = params * 16.0;  // fp32 weights + gradients + Adam's two moments
  const double have = static_cast<double>(physical_memory_bytes());
  if (have <= 0 || need <= have) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s give about %.3g parameters, %.1f GiB with gradients and Adam states; this machine has %.1f GiB",
                keys.c_str(), params, need / 1073741824.0, have / 1073741824.0);
  return buf;
}

}  // namespace rpe
