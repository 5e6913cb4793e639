// Parameter count and memory estimate of a model before allocation (see model_size.h).
#include "config/model_size.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace rpe {
namespace {

// Parameters of the method-specific position tables (see each method's file).
double position_parameters(const ModelOptions& m) {
  const auto& a = m.attention;
  const double D = static_cast<double>(m.hidden), L = static_cast<double>(m.layers);
  const double k = static_cast<double>(a.max_relative > 0 ? a.max_relative : m.max_position - 1);
  const double table_heads = a.share_across_heads ? 1.0 : static_cast<double>(m.heads);
  const double d = D / static_cast<double>(m.heads);
  double p = (a.method == "absolute" || a.add_absolute) ? static_cast<double>(m.max_position) * D : 0.0;
  if (a.method == "shaw") p += L * table_heads * (2 * k + 1) * d * (a.shaw_values ? 2 : 1);
  if (a.method == "m3" || a.method == "m4") p += L * table_heads * (2 * k + 1) * d;
  if (a.method == "m1") p += L * table_heads * (k + 1);
  if (a.method == "m2") p += L * table_heads * (2 * k + 1);
  if (a.method == "transformer_xl") p += L * (D * D + 2 * D);
  if (a.method == "deberta") p += L * 2 * D * D + (2 * k + 1) * D;
  if (a.method == "t5_bias") p += static_cast<double>(a.t5_buckets) * table_heads;
  return p;
}

}  // namespace

double estimated_parameters(const ModelOptions& m, int64_t vocab_hint) {
  const double D = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn);
  const double V = static_cast<double>(m.vocab_size > 0 ? m.vocab_size : std::max<int64_t>(vocab_hint, 0));
  const double embeddings = (V + static_cast<double>(m.type_vocab_size)) * D + 2 * D;
  const double layer = 4 * (D * D + D) + 2 * D * F + F + D + 4 * D;  // q, k, v, out; FFN; 2 LayerNorms
  const double mlm_head = D * D + 3 * D + V;
  return embeddings + static_cast<double>(m.layers) * layer + mlm_head + position_parameters(m);
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
