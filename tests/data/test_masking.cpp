// Dynamic whole-word masking: statistics on a large sample (selected fraction, 80/10/10),
// whole words, specials never selected, labels only on selected tokens, determinism per
// (seed, epoch, sequence), and token-level masking.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "data/masking.h"

namespace rpe {
namespace {

constexpr int64_t kLen = 128, kVocab = 1000, kFirstRegular = 10;
const SpecialIds kSpecial{0, 1, 2, 3, 4};

// [CLS] words... [SEP] [PAD]...: words of 1-4 tokens; a mid-sequence [SEP] as a document boundary.
struct Sample {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> word_start;
  int64_t rows = 0;
};

Sample make_sample(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  Sample s;
  s.rows = rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t real = 40 + static_cast<int64_t>(rng() % (kLen - 41));  // tokens before padding
    s.tokens.push_back(kSpecial.cls);
    s.word_start.push_back(0);
    int64_t left_in_word = 0;
    for (int64_t i = 1; i < real - 1; ++i) {
      if (i == real / 2) {  // document boundary
        s.tokens.push_back(kSpecial.sep);
        s.word_start.push_back(0);
        left_in_word = 0;
        continue;
      }
      const bool start = left_in_word == 0;
      if (start) left_in_word = 1 + static_cast<int64_t>(rng() % 4);
      --left_in_word;
      s.tokens.push_back(kFirstRegular + static_cast<int32_t>(rng() % (kVocab - kFirstRegular)));
      s.word_start.push_back(start ? 1 : 0);
    }
    s.tokens.push_back(kSpecial.sep);
    s.word_start.push_back(0);
    while (static_cast<int64_t>(s.tokens.size()) < (r + 1) * kLen) {
      s.tokens.push_back(kSpecial.pad);
      s.word_start.push_back(0);
    }
  }
  return s;
}

bool is_special(int32_t t) { return t >= 0 && t <= 4; }

struct Masked {
  std::vector<int64_t> ids, labels;
};

Masked mask_all(const Sample& s, const MaskingOptions& o, uint64_t seed, uint64_t epoch) {
  Masked m{std::vector<int64_t>(s.tokens.size()), std::vector<int64_t>(s.tokens.size())};
  for (int64_t r = 0; r < s.rows; ++r)
    mask_sequence(s.tokens.data() + r * kLen, s.word_start.data() + r * kLen, kLen, kSpecial, kFirstRegular, kVocab, o,
                  masking_seed(seed, epoch, static_cast<uint64_t>(r)), m.ids.data() + r * kLen,
                  m.labels.data() + r * kLen);
  return m;
}

TEST(Masking, WholeWordStatisticsOnALargeSample) {
  const Sample s = make_sample(20000, 7);  // ~1.7M real tokens
  const Masked m = mask_all(s, MaskingOptions{}, 1234, 0);
  int64_t real = 0, selected = 0, as_mask = 0, as_random = 0, kept = 0;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const int32_t t = s.tokens[i];
    if (is_special(t)) {
      ASSERT_EQ(m.labels[i], kIgnoreLabel) << "special token selected at " << i;
      ASSERT_EQ(m.ids[i], t);
      continue;
    }
    ++real;
    if (m.labels[i] == kIgnoreLabel) {
      ASSERT_EQ(m.ids[i], t) << "unselected token changed at " << i;
      continue;
    }
    ASSERT_EQ(m.labels[i], t) << "label is not the original token";
    ++selected;
    if (m.ids[i] == kSpecial.mask) ++as_mask;
    else if (m.ids[i] == t) ++kept;
    else {
      ++as_random;
      ASSERT_GE(m.ids[i], kFirstRegular);
      ASSERT_LT(m.ids[i], kVocab);
    }
  }
  const double frac = static_cast<double>(selected) / static_cast<double>(real);
  const double sel = static_cast<double>(selected);
  std::printf("%lld regular tokens: selected %.4f; of those [MASK] %.4f, random %.4f, kept %.4f\n",
              static_cast<long long>(real), frac, as_mask / sel, as_random / sel, kept / sel);
  EXPECT_NEAR(frac, 0.15, 0.005);
  // A random replacement equals the original with probability 1/990: counted as "kept" here.
  EXPECT_NEAR(as_mask / sel, 0.8, 0.01);
  EXPECT_NEAR(as_random / sel, 0.1, 0.01);
  EXPECT_NEAR(kept / sel, 0.1, 0.01);

  // Every word is selected entirely or not at all.
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (is_special(s.tokens[i]) || s.word_start[i]) continue;  // continuation token
    ASSERT_FALSE(is_special(s.tokens[i - 1]));
    ASSERT_EQ(m.labels[i] == kIgnoreLabel, m.labels[i - 1] == kIgnoreLabel) << "word split at " << i;
  }
}

TEST(Masking, DeterministicPerSeedEpochAndSequence) {
  const Sample s = make_sample(300, 3);
  const Masked a = mask_all(s, MaskingOptions{}, 42, 0), b = mask_all(s, MaskingOptions{}, 42, 0);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(mask_all(s, MaskingOptions{}, 43, 0).labels, a.labels);  // another seed
  EXPECT_NE(mask_all(s, MaskingOptions{}, 42, 1).labels, a.labels);  // another epoch
  EXPECT_NE(masking_seed(42, 0, 5), masking_seed(42, 0, 6));
}

TEST(Masking, TokenLevelSplitsWordsAndKeepsTheFraction) {
  const Sample s = make_sample(5000, 11);
  MaskingOptions o;
  o.whole_word = false;
  const Masked m = mask_all(s, o, 5, 0);
  int64_t real = 0, selected = 0, split_words = 0;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (is_special(s.tokens[i])) continue;
    ++real;
    selected += m.labels[i] != kIgnoreLabel;
    if (!s.word_start[i] && (m.labels[i] == kIgnoreLabel) != (m.labels[i - 1] == kIgnoreLabel)) ++split_words;
  }
  EXPECT_NEAR(static_cast<double>(selected) / static_cast<double>(real), 0.15, 0.005);
  EXPECT_GT(split_words, 1000);  // single tokens are chosen, so words get split
}

TEST(Masking, ConfigurableRatesAreHonoured) {
  const Sample s = make_sample(5000, 13);
  MaskingOptions o;
  o.mask_prob = 0.3;
  o.mask_token_prob = 1.0;
  o.random_token_prob = 0.0;
  const Masked m = mask_all(s, o, 9, 2);
  int64_t real = 0, selected = 0;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (is_special(s.tokens[i])) continue;
    ++real;
    if (m.labels[i] == kIgnoreLabel) continue;
    ++selected;
    ASSERT_EQ(m.ids[i], kSpecial.mask);
  }
  EXPECT_NEAR(static_cast<double>(selected) / static_cast<double>(real), 0.3, 0.005);
}

}  // namespace
}  // namespace rpe
