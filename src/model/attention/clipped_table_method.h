// The model-level half of methods whose layers each hold one learned clipped relative table
// (m3, m4): the methods differ only in their per-layer term.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/attention/position_method.h"

namespace rpe {

// describe() of a method with a clipping distance, per head or shared: "<name> (k=<k>, per head)"
// or "<name> (k=<k>, shared across heads)" (m1-m4).
std::string describe_clipped(const PositionMethodImpl& method, const std::string& name);

// One Term(table_heads, k, d, init_std) per layer: a (2k+1)-row table, per head unless shared.
template <class Term> class ClippedTableMethod : public PositionMethodImpl {
 public:
  ClippedTableMethod(const ModelOptions& options, std::string name)
      : PositionMethodImpl(options, false), name_(std::move(name)) {
    clip_distance();  // a bad max_relative fails at build
  }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<Term>(table_heads(), clip_distance(), head_size(), options_.init_std);
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "share_across_heads"}; }
  std::string describe() const override { return describe_clipped(*this, name_); }

 private:
  std::string name_;
};

}  // namespace rpe
