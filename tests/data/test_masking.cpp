// Dynamic whole-word masking: statistics on a large sample (selected fraction, 80/10/10),
// whole words, specials never selected, labels only on selected tokens, determinism per
// (seed, epoch, sequence), and token-level masking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

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

// A word is never split, so a sequence that is one word of more pieces than ~15% of its tokens
// (a one-word corpus) masks nothing: a loss of 0 and an accuracy of no token. can_mask says so
// up front (the trainer refuses such a corpus), and agrees with mask_sequence on every sequence.
TEST(Masking, CanMaskTellsWhetherAnyTokenIsSelected) {
  auto selects = [](const std::vector<int32_t>& tokens, const std::vector<uint8_t>& starts, const MaskingOptions& o,
                    uint64_t seed) {
    const auto L = static_cast<int64_t>(tokens.size());
    std::vector<int64_t> ids(tokens.size()), labels(tokens.size());
    mask_sequence(tokens.data(), starts.data(), L, kSpecial, kFirstRegular, kVocab, o, seed, ids.data(), labels.data());
    return std::any_of(labels.begin(), labels.end(), [](int64_t l) { return l != kIgnoreLabel; });
  };
  // [CLS] one 3-piece word [SEP] [PAD]: a budget of 1 token, a word of 3.
  const std::vector<int32_t> one_word = {kSpecial.cls, 20, 21, 22, kSpecial.sep, kSpecial.pad};
  const std::vector<uint8_t> starts = {0, 1, 0, 0, 0, 0};
  EXPECT_FALSE(can_mask(one_word.data(), starts.data(), 6, kSpecial, MaskingOptions{}));
  for (uint64_t seed = 0; seed < 20; ++seed) EXPECT_FALSE(selects(one_word, starts, MaskingOptions{}, seed));
  MaskingOptions tokens_only;
  tokens_only.whole_word = false;
  EXPECT_TRUE(can_mask(one_word.data(), starts.data(), 6, kSpecial, tokens_only));
  EXPECT_TRUE(selects(one_word, starts, tokens_only, 0));
  const std::vector<uint8_t> single = {0, 1, 1, 0, 0, 0};  // a 1-piece word beside a 2-piece one
  EXPECT_TRUE(can_mask(one_word.data(), single.data(), 6, kSpecial, MaskingOptions{}));
  const std::vector<int32_t> specials_only = {kSpecial.cls, kSpecial.sep, kSpecial.pad};
  EXPECT_FALSE(can_mask(specials_only.data(), starts.data(), 3, kSpecial, MaskingOptions{}));
  // The same answer as mask_sequence's on short sequences of words of 1-4 pieces.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> tokens = {kSpecial.cls};
    std::vector<uint8_t> ws = {0};
    const int words = 1 + static_cast<int>(rng() % 3);
    for (int w = 0; w < words; ++w)
      for (int p = 0, n = 1 + static_cast<int>(rng() % 4); p < n; ++p) {
        tokens.push_back(kFirstRegular + static_cast<int32_t>(rng() % 100));
        ws.push_back(p == 0);
      }
    tokens.push_back(kSpecial.sep);
    ws.push_back(0);
    EXPECT_EQ(can_mask(tokens.data(), ws.data(), static_cast<int64_t>(tokens.size()), kSpecial, MaskingOptions{}),
              selects(tokens, ws, MaskingOptions{}, static_cast<uint64_t>(trial)))
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace rpe
