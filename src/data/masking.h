// Dynamic (whole-word) masking for MLM, done in the collator (Devlin et al. 2019; RoBERTa).
// Words are chosen in random order until ~mask_prob of the real tokens are selected;
// selected tokens become [MASK] (80%), a random token (10%) or stay (10%). Labels are the
// original ids on selected tokens and -100 elsewhere. The randomness of sequence s in
// epoch e depends only on (seed, e, s), so runs with different attention methods see the
// same masks and a resumed run continues exactly.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "data/tokenizer.h"

namespace rpe {

inline constexpr int32_t kIgnoreLabel = -100;

struct MaskingOptions {
  double mask_prob = 0.15;
  double mask_token_prob = 0.8;
  double random_token_prob = 0.1;
  bool whole_word = true;
  static MaskingOptions from(const DataOptions& d) {
    return {d.mask_prob, d.mask_token_prob, d.random_token_prob, d.whole_word};
  }
};

// Small counter-based generator (SplitMix64): cheap to seed per sequence.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

// Seed for (seed, epoch, sequence index).
uint64_t masking_seed(uint64_t seed, uint64_t epoch, uint64_t index);

// Masks one sequence of length L in place. tokens/word_start: [L] inputs; out_ids and
// out_labels: [L] outputs. Special tokens (pad, cls, sep, mask) are never selected.
void mask_sequence(const int32_t* tokens, const uint8_t* word_start, int64_t length, const SpecialIds& special,
                   int32_t first_regular_id, int64_t vocab_size, const MaskingOptions& options, uint64_t rng_seed,
                   int64_t* out_ids, int64_t* out_labels);

// Whether mask_sequence selects any token of this sequence (whatever its seed): a word of at
// most the budget (~mask_prob of its regular tokens, at least 1) exists. A word is never split,
// so a sequence that is one long word (a 3-piece word in 7 tokens) masks nothing.
bool can_mask(const int32_t* tokens, const uint8_t* word_start, int64_t length, const SpecialIds& special,
              const MaskingOptions& options);

}  // namespace rpe
