// What the config layer knows of position methods, without depending on model/ (config is
// the lowest layer): each method's facts, as the method's registry entry states them
// (model/attention/registry.cpp). The registry fills this catalogue before main() runs;
// a program that links no model (the YAML fuzz target) sees it empty, and config reading
// then checks no method names and counts no position parameters.
#pragma once
#include <string>
#include <vector>

namespace rpe {

struct ModelOptions;

struct MethodFacts {
  std::string name;                  // model.attention.method
  std::vector<std::string> aliases;  // other accepted spellings (the paper's method1..method4)
  std::string summary;               // one line for `rpe-train methods`
  bool learned_absolute = false;     // keeps a learned [n, D] input table: inputs are limited to n
  bool clipped = false;              // has a clipping distance k (reads model.attention.max_relative)
  // max_relative 0 means no clipping at all rather than k = n - 1: no table is sized by k
  // (transformer_xl's sinusoid reaches any distance).
  bool unclipped_at_zero = false;
  // Method swap: a zero-initialised new table is the neutral start (the model computes what
  // it did before the swap). Not for multiplicative gates (m1–m3), whose own init is neutral,
  // nor for deberta, whose 1/sqrt(3d) scale leaves no start neutral (it starts from its init).
  bool zero_is_neutral = true;
  // A rule the model options break, checked when a config is read (e.g. RoPE's even head
  // size, T5's bucket counts): the key at fault and the message (empty = none).
  struct Problem {
    std::string key, message;
  };
  Problem (*config_problem)(const ModelOptions&) = nullptr;
  // Parameters of the method's own position tables (besides a learned absolute table), for
  // the memory estimate made before anything is allocated (config/model_size.h).
  double (*position_parameters)(const ModelOptions&) = nullptr;
};

// The registered methods in registry order (pointers to the registry's static entries).
inline std::vector<const MethodFacts*>& method_catalogue() {
  static std::vector<const MethodFacts*> catalogue;
  return catalogue;
}

// The entry whose name or alias is `name`; nullptr when none.
inline const MethodFacts* find_method_facts(const std::string& name) {
  for (const MethodFacts* m : method_catalogue()) {
    if (m->name == name) return m;
    for (const auto& alias : m->aliases)
      if (alias == name) return m;
  }
  return nullptr;
}

}  // namespace rpe
