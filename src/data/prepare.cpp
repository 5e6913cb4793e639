// prepare-data: parallel tokenization of text files into shards, with a manifest.
#include "data/prepare.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <regex>
#include <thread>

#include "data/corpus.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kUnitBytes = 1 << 20;  // work unit: ~1 MB of text, cut at a blank line
constexpr int kFormatVersion = 1;        // of the manifest + shard set

// A whole input file mapped read-only.
class MappedText {
 public:
  explicit MappedText(const fs::path& file) {
    const std::string name = file.string();
    if (!fs::exists(file)) throw UserError(name + ": file not found");
    const int fd = ::open(name.c_str(), O_RDONLY);
    if (fd < 0) throw UserError(name + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st {};
    ::fstat(fd, &st);
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data_ == MAP_FAILED) throw UserError(name + ": cannot memory-map");
  }
  ~MappedText() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  std::string_view text() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

bool is_blank(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// Unit boundaries: start of the first blank line at or after each ~kUnitBytes step.
std::vector<size_t> unit_starts(std::string_view text) {
  std::vector<size_t> starts{0};
  size_t target = kUnitBytes;
  while (target < text.size()) {
    size_t p = text.find('\n', target);
    size_t cut = std::string_view::npos;
    while (p != std::string_view::npos && p + 1 < text.size()) {
      const size_t line = p + 1;
      size_t e = text.find('\n', line);
      if (e == std::string_view::npos) e = text.size();
      if (is_blank(text.substr(line, e - line))) {
        cut = line;
        break;
      }
      p = e == text.size() ? std::string_view::npos : e;
    }
    if (cut == std::string_view::npos) break;
    starts.push_back(cut);
    target = cut + kUnitBytes;
  }
  return starts;
}

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Tokenized documents of one unit.
struct UnitResult {
  std::vector<int32_t> ids;
  std::vector<uint8_t> starts;
  std::vector<int64_t> sentence_lengths;  // per sentence, all documents concatenated
  std::vector<int64_t> doc_sentences;     // sentences per document
  size_t bad_utf8 = std::string_view::npos;  // offset within the unit
  uint64_t hash = 0;
};

void tokenize_unit(std::string_view text, const Tokenizer& tok, UnitResult& r) {
  r.hash = fnv1a(text);
  r.bad_utf8 = find_invalid_utf8(text);
  if (r.bad_utf8 != std::string_view::npos) return;
  int64_t in_doc = 0;
  size_t start = 0;
  while (start < text.size()) {  // same document/sentence rules as read_documents()
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) {
      if (in_doc) r.doc_sentences.push_back(in_doc);
      in_doc = 0;
    } else {
      const Encoding e = tok.encode(line);
      r.ids.insert(r.ids.end(), e.ids.begin(), e.ids.end());
      r.starts.insert(r.starts.end(), e.word_start.begin(), e.word_start.end());
      r.sentence_lengths.push_back(static_cast<int64_t>(e.ids.size()));
      ++in_doc;
    }
    start = end + 1;
  }
  if (in_doc) r.doc_sentences.push_back(in_doc);
}

// Writes a split's shards as <name>-00000.shard, ... whenever the builder is full.
class SplitWriter {
 public:
  SplitWriter(fs::path dir, std::string name, int64_t vocab, int64_t shard_tokens)
      : dir_(std::move(dir)), name_(std::move(name)), vocab_(vocab), shard_tokens_(shard_tokens) {}

  void add(const int32_t* ids, const uint8_t* starts, const std::vector<int64_t>& lengths) {
    const int64_t before = builder_.tokens(), docs_before = builder_.documents();
    builder_.add_document(ids, starts, lengths);
    tokens_ += builder_.tokens() - before;
    documents_ += builder_.documents() - docs_before;
    if (builder_.tokens() >= shard_tokens_) flush();
  }
  void flush() {
    if (builder_.tokens() == 0) return;
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05zu.shard", name_.c_str(), files_.size());
    const uint64_t bytes = builder_.write(dir_ / name, vocab_);
    words_ += builder_.words();
    files_.push_back({{"file", name}, {"tokens", builder_.tokens()}, {"documents", builder_.documents()},
                      {"bytes", bytes}});
    builder_.clear();
  }
  json files() const { return files_; }
  int64_t tokens_ = 0, documents_ = 0, words_ = 0;

 private:
  fs::path dir_;
  std::string name_;
  int64_t vocab_, shard_tokens_;
  ShardBuilder builder_;
  json files_ = json::array();
};

int64_t mtime_ns(const fs::path& f) {
  struct stat st {};
  if (::stat(f.string().c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

json file_identity(const std::string& f) {
  if (!fs::exists(f)) throw UserError(f + ": file not found");
  return {{"path", f}, {"bytes", static_cast<int64_t>(fs::file_size(f))}, {"mtime_ns", mtime_ns(f)}};
}

// What the output depends on besides the inputs' bytes.
json settings_of(const DataOptions& d, const Tokenizer& tok) {
  json s = {{"format_version", kFormatVersion}, {"tokenizer", tok.kind()},      {"vocab_size", tok.vocab_size()},
            {"lowercase", d.lowercase},         {"valid_fraction", d.valid_fraction},
            {"shard_tokens", d.shard_tokens},   {"train_files", d.train_files}, {"valid_files", d.valid_files}};
  s["tokenizer_model"] = d.tokenizer_model.empty() ? json(nullptr) : file_identity(d.tokenizer_model);
  return s;
}

bool up_to_date(const fs::path& dir, const json& settings, const json& inputs, json& manifest) {
  const fs::path m = dir / "manifest.json";
  if (!fs::exists(m)) return false;
  try {
    manifest = json::parse(read_file(m));
    if (manifest.at("settings") != settings) return false;
    const json& old = manifest.at("inputs");
    if (old.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      for (const char* k : {"path", "bytes", "mtime_ns"})
        if (old[i].at(k) != inputs[i].at(k)) return false;
    for (const char* split : {"train", "valid"})
      for (const auto& f : manifest.at("shards").at(split))
        if (!fs::exists(dir / f.at("file").get<std::string>()) ||
            fs::file_size(dir / f.at("file").get<std::string>()) != f.at("bytes").get<uint64_t>())
          return false;
    return true;
  } catch (const json::exception&) {
    return false;  // unreadable manifest: rebuild
  }
}

PrepareSummary summary_from(const json& m) {
  const json& s = m.at("summary");
  PrepareSummary r;
  for (auto [key, field] : std::initializer_list<std::pair<const char*, int64_t*>>{
           {"documents", &r.documents}, {"sentences", &r.sentences}, {"tokens", &r.tokens}, {"words", &r.words},
           {"bytes", &r.bytes}, {"train_documents", &r.train_documents}, {"valid_documents", &r.valid_documents},
           {"train_tokens", &r.train_tokens}, {"valid_tokens", &r.valid_tokens}, {"train_shards", &r.train_shards},
           {"valid_shards", &r.valid_shards}})
    *field = s.at(key).get<int64_t>();
  r.seconds = s.at("seconds").get<double>();
  return r;
}

}  // namespace

PrepareSummary prepare_data(const DataOptions& d, const Tokenizer& tok, const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  require(!o.out_dir.empty(), "prepare-data: no output folder (give --out or data.shards)");
  json inputs = json::array();
  for (const auto& f : d.train_files) inputs.push_back(file_identity(f));
  for (const auto& f : d.valid_files) inputs.push_back(file_identity(f));
  const json settings = settings_of(d, tok);
  json old;
  if (!o.force && up_to_date(o.out_dir, settings, inputs, old)) {
    PrepareSummary s = summary_from(old);
    s.up_to_date = true;
    return s;
  }

  // Clear the previous output: the manifest first, so an interrupted run is never mistaken for a finished one.
  fs::create_directories(o.out_dir);
  fs::remove(o.out_dir / "manifest.json");
  static const std::regex shard_name(R"((train|valid)-\d{5}\.shard)");
  for (const auto& e : fs::directory_iterator(o.out_dir))
    if (std::regex_match(e.path().filename().string(), shard_name)) fs::remove(e.path());

  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  SplitWriter train(o.out_dir, "train", tok.vocab_size(), d.shard_tokens);
  SplitWriter valid(o.out_dir, "valid", tok.vocab_size(), d.shard_tokens);
  const bool split_off = d.valid_files.empty() && d.valid_fraction > 0.0;
  const int64_t every = split_off ? std::max<int64_t>(2, std::llround(1.0 / d.valid_fraction)) : 0;
  PrepareSummary sum;
  int64_t train_doc_index = 0;

  const size_t n_train = d.train_files.size();
  std::vector<std::string> files = d.train_files;
  files.insert(files.end(), d.valid_files.begin(), d.valid_files.end());
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const bool is_valid_file = fi >= n_train;
    const MappedText mapped(files[fi]);
    const std::string_view text = mapped.text();
    if (text.empty()) throw UserError(files[fi] + ": file is empty");
    std::vector<size_t> starts = unit_starts(text);
    starts.push_back(text.size());
    const size_t units = starts.size() - 1;
    uint64_t file_hash = 0xcbf29ce484222325ULL;
    int64_t file_docs = 0;
    // Batches of units: tokenized in parallel, consumed in order.
    const size_t batch = static_cast<size_t>(threads) * 4;
    for (size_t b0 = 0; b0 < units; b0 += batch) {
      const size_t b1 = std::min(units, b0 + batch);
      std::vector<UnitResult> results(b1 - b0);
      std::atomic<size_t> next{b0};
      auto work = [&] {
        for (size_t u; (u = next.fetch_add(1)) < b1;)
          tokenize_unit(text.substr(starts[u], starts[u + 1] - starts[u]), tok, results[u - b0]);
      };
      std::vector<std::thread> pool;
      for (int t = 1; t < threads && t < static_cast<int>(b1 - b0); ++t) pool.emplace_back(work);
      work();
      for (auto& t : pool) t.join();
      for (size_t u = b0; u < b1; ++u) {
        const UnitResult& r = results[u - b0];
        if (r.bad_utf8 != std::string_view::npos)
          throw UserError(files[fi] + ": invalid UTF-8 at byte offset " + std::to_string(starts[u] + r.bad_utf8));
        file_hash = fnv1a(std::string_view(reinterpret_cast<const char*>(&r.hash), 8), file_hash);
        size_t sent = 0, tok_at = 0;
        for (const int64_t n_sent : r.doc_sentences) {
          std::vector<int64_t> lengths(r.sentence_lengths.begin() + static_cast<std::ptrdiff_t>(sent),
                                       r.sentence_lengths.begin() + static_cast<std::ptrdiff_t>(sent + n_sent));
          int64_t doc_tokens = 0;
          for (const auto l : lengths) doc_tokens += l;
          sum.sentences += n_sent;
          ++file_docs;
          bool to_valid = is_valid_file;
          if (!is_valid_file) to_valid = split_off && train_doc_index++ % every == every - 1;
          (to_valid ? valid : train).add(r.ids.data() + tok_at, r.starts.data() + tok_at, lengths);
          sent += static_cast<size_t>(n_sent);
          tok_at += static_cast<size_t>(doc_tokens);
        }
      }
    }
    if (file_docs == 0) throw UserError(files[fi] + ": no text (only blank lines)");
    sum.bytes += static_cast<int64_t>(text.size());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(file_hash));
    inputs[fi]["fnv1a64_units"] = hex;
    log::info("data", "{}: {} units, {:.1f} MB", files[fi], units, static_cast<double>(text.size()) / 1e6);
  }
  train.flush();
  valid.flush();
  if (train.tokens_ == 0) throw UserError(d.train_files.front() + ": the training files produced no tokens");

  sum.train_documents = train.documents_;
  sum.valid_documents = valid.documents_;
  sum.documents = sum.train_documents + sum.valid_documents;
  sum.train_tokens = train.tokens_;
  sum.valid_tokens = valid.tokens_;
  sum.tokens = sum.train_tokens + sum.valid_tokens;
  sum.words = train.words_ + valid.words_;
  sum.train_shards = static_cast<int64_t>(train.files().size());
  sum.valid_shards = static_cast<int64_t>(valid.files().size());
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const json summary = {{"documents", sum.documents},
                        {"sentences", sum.sentences},
                        {"tokens", sum.tokens},
                        {"words", sum.words},
                        {"bytes", sum.bytes},
                        {"train_documents", sum.train_documents},
                        {"valid_documents", sum.valid_documents},
                        {"train_tokens", sum.train_tokens},
                        {"valid_tokens", sum.valid_tokens},
                        {"train_shards", sum.train_shards},
                        {"valid_shards", sum.valid_shards},
                        {"seconds", sum.seconds},
                        {"threads", threads}};
  const json manifest = {{"settings", settings},
                         {"inputs", inputs},
                         {"shards", {{"train", train.files()}, {"valid", valid.files()}}},
                         {"summary", summary}};
  write_file_atomic(o.out_dir / "manifest.json", manifest.dump(2) + "\n");
  return sum;
}

std::vector<TokenStream> PreparedShards::streams(const std::vector<std::unique_ptr<MappedShard>>& shards) {
  std::vector<TokenStream> out;
  for (const auto& s : shards) out.push_back(s->stream());
  return out;
}

PreparedShards open_prepared(const fs::path& dir, const Tokenizer& tok) {
  const fs::path m = dir / "manifest.json";
  if (!fs::exists(m)) throw UserError(dir.string() + ": no manifest.json (run rpe-train prepare-data first)");
  json manifest;
  try {
    manifest = json::parse(read_file(m));
  } catch (const json::exception& e) {
    throw UserError(m.string() + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  PreparedShards p;
  try {
    const std::string kind = manifest.at("settings").at("tokenizer").get<std::string>();
    if (kind != tok.kind())
      throw UserError(m.string() + ": shards were made with the " + kind + " tokenizer, the config uses " + tok.kind());
    for (const char* split : {"train", "valid"})
      for (const auto& f : manifest.at("shards").at(split)) {
        auto shard = std::make_unique<MappedShard>(dir / f.at("file").get<std::string>());
        if (shard->vocab_size() != tok.vocab_size())
          throw UserError(shard->file().string() + ": written for a vocabulary of " +
                          std::to_string(shard->vocab_size()) + ", the tokenizer has " +
                          std::to_string(tok.vocab_size()));
        (std::string(split) == "train" ? p.train : p.valid).push_back(std::move(shard));
      }
  } catch (const json::exception& e) {
    throw UserError(m.string() + ": unexpected layout (" + std::string(e.what()) + ")");
  }
  if (p.train.empty()) throw UserError(m.string() + ": lists no training shards");
  return p;
}

}  // namespace rpe
