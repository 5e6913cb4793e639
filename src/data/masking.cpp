// Whole-word / token masking.
#include "data/masking.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace rpe {

uint64_t masking_seed(uint64_t seed, uint64_t epoch, uint64_t index) {
  SplitMix64 mix(seed * 0x9E3779B97F4A7C15ULL ^ (epoch + 0x632BE59BD9B4E019ULL));
  const uint64_t a = mix.next();
  SplitMix64 mix2(a ^ (index * 0xD1B54A32D192ED03ULL));
  return mix2.next();
}

namespace {
using Words = std::vector<std::pair<int32_t, int32_t>>;

// Candidate words: [begin, end) runs of regular tokens; a word starts at word_start (or at any
// token when masking single tokens). Returns the number of regular tokens.
int64_t find_words(const int32_t* tokens, const uint8_t* word_start, int64_t L, const SpecialIds& sp, bool whole_word,
                   Words& words) {
  words.clear();
  int64_t real = 0;
  for (int64_t i = 0; i < L; ++i) {
    const int32_t t = tokens[i];
    const bool special = t == sp.pad || t == sp.cls || t == sp.sep || t == sp.mask;
    if (special) continue;
    ++real;
    const bool starts = !whole_word || word_start[i] || words.empty() || words.back().second != i;
    if (starts) {
      words.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
    } else {
      words.back().second = static_cast<int32_t>(i + 1);
    }
  }
  return real;
}

// How many tokens a sequence of `real` regular tokens masks: ~mask_prob of them, at least 1.
int64_t mask_budget(int64_t real, double mask_prob) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(real) * mask_prob));
}
}  // namespace

bool can_mask(const int32_t* tokens, const uint8_t* word_start, int64_t L, const SpecialIds& sp,
              const MaskingOptions& o) {
  thread_local Words words;
  const int64_t budget = mask_budget(find_words(tokens, word_start, L, sp, o.whole_word, words), o.mask_prob);
  return std::any_of(words.begin(), words.end(), [&](const auto& w) { return w.second - w.first <= budget; });
}

void mask_sequence(const int32_t* tokens, const uint8_t* word_start, int64_t L, const SpecialIds& sp,
                   int32_t first_regular_id, int64_t vocab_size, const MaskingOptions& o, uint64_t rng_seed,
                   int64_t* out_ids, int64_t* out_labels) {
  SplitMix64 rng(rng_seed);
  for (int64_t i = 0; i < L; ++i) {
    out_ids[i] = tokens[i];
    out_labels[i] = kIgnoreLabel;
  }
  thread_local Words words;
  const int64_t real = find_words(tokens, word_start, L, sp, o.whole_word, words);
  if (real == 0) return;
  const int64_t budget = mask_budget(real, o.mask_prob);
  // Fisher–Yates shuffle of the words, then take words while they fit the budget.
  for (size_t i = words.size(); i > 1; --i) std::swap(words[i - 1], words[rng.below(i)]);
  int64_t selected = 0;
  const uint64_t random_span = static_cast<uint64_t>(vocab_size - first_regular_id);
  for (const auto& [b, e] : words) {
    if (selected >= budget) break;
    if (selected + (e - b) > budget) continue;  // keep near the target fraction (BERT does the same)
    selected += e - b;
    for (int32_t i = b; i < e; ++i) {
      out_labels[i] = tokens[i];
      const double u = rng.uniform();
      if (u < o.mask_token_prob) {
        out_ids[i] = sp.mask;
      } else if (u < o.mask_token_prob + o.random_token_prob) {
        out_ids[i] = first_regular_id + static_cast<int64_t>(rng.below(random_span));
      }
    }
  }
}

}  // namespace rpe
