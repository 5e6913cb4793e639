// prepare-data: streaming, parallel tokenization of text files into shards, with a manifest.
#include "data/prepare.h"

#include <atomic>
#include <chrono>
#include <regex>
#include <stdexcept>
#include <thread>

#include "data/chunk_pipeline.h"
#include "data/corpus.h"
#include "data/manifest.h"
#include "data/text_reader.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_lock.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void tokenize_chunk(std::string_view text, DocumentFormat format, const Tokenizer& tok, ChunkResult& r) {
  r.bad_utf8 = find_invalid_utf8(text);
  if (r.bad_utf8 != std::string_view::npos) return;
  int64_t in_doc = 0;
  split_documents(  // the same document/sentence rules as read_documents()
      text, format,
      [&](std::string_view line) {
        const Encoding e = tok.encode_corpus(line);
        r.ids.insert(r.ids.end(), e.ids.begin(), e.ids.end());
        r.starts.insert(r.starts.end(), e.word_start.begin(), e.word_start.end());
        r.sentence_lengths.push_back(static_cast<int64_t>(e.ids.size()));
        ++in_doc;
      },
      [&] {
        r.doc_sentences.push_back(in_doc);
        in_doc = 0;
      });
}

// Writes a split's shards as <name>-00000.shard, ... whenever the builder is full.
class SplitWriter {
 public:
  SplitWriter(fs::path dir, std::string name, int64_t vocab, int64_t shard_tokens, std::atomic<int64_t>* budget)
      : dir_(std::move(dir)), name_(std::move(name)), vocab_(vocab), shard_tokens_(shard_tokens), budget_(budget) {}

  void add(const int32_t* ids, const uint8_t* starts, const int64_t* lengths, size_t sentences) {
    const int64_t before = builder_.tokens(), docs_before = builder_.documents();
    builder_.add_document(ids, starts, lengths, sentences);
    tokens_ += builder_.tokens() - before;
    documents_ += builder_.documents() - docs_before;
    if (builder_.tokens() >= shard_tokens_) flush();
  }
  void flush() {
    if (builder_.tokens() == 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05zu.shard", name_.c_str(), files_.size());
    const ShardFileInfo info = builder_.write(dir_ / name, vocab_);
    words_ += builder_.words();
    files_.push_back({{"file", name},
                      {"tokens", builder_.tokens()},
                      {"documents", builder_.documents()},
                      {"bytes", info.bytes},
                      {"checksum", manifest::hex64(info.checksum)}});
    builder_.clear();
    write_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (budget_ && --*budget_ == 0) throw std::runtime_error("prepare-data: injected failure after a shard");
  }
  json files() const { return files_; }
  int64_t tokens_ = 0, documents_ = 0, words_ = 0;
  double write_seconds_ = 0;  // writing shard files (part of the commit time)

 private:
  fs::path dir_;
  std::string name_;
  int64_t vocab_, shard_tokens_;
  std::atomic<int64_t>* budget_;
  ShardBuilder builder_;
  json files_ = json::array();
};

// Removes what an earlier run left: the manifest first (so nothing half-done is trusted),
// then shards, their verification stamps, locks and temporary files of interrupted writes.
void clear_output(const fs::path& dir) {
  fs::create_directories(dir);
  fs::remove(dir / "manifest.json");
  static const std::regex ours(R"(((train|valid)-\d{5}\.shard|index-.*\.bin|input-[0-9a-f]{16})(\.verified)?(\.lock)?(\.tmp\.\d+)?)");
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), ours)) old.push_back(e.path());
  for (const auto& p : old) fs::remove(p);
}

// The inputs as they are before anything is cleared: "<file>: file not found" (and a file that
// cannot be opened, a .gz that is not gzip) fails while the old shards still stand. Their size
// and mtime are taken here, before the read; the checksums come from it (record_input).
json inputs_to_read(const DataOptions& d, DocumentFormat format) {
  json inputs = manifest::input_identities(d, /*missing_ok=*/false);
  for (const auto* files : {&d.train_files, &d.valid_files})
    for (const auto& f : *files) ChunkReader opened(f, format);  // opens only, reads nothing
  return inputs;
}

// Size and mtime again once every file was read: a file written to meanwhile (an append, a
// rewrite) would stand in the manifest for text the shards do not hold (record_input has
// already matched each file's byte count). Called before the manifest is written, so nothing
// is trusted.
void require_unchanged(const std::vector<std::string>& files, const json& inputs) {
  for (size_t fi = 0; fi < files.size(); ++fi) {
    std::error_code ec;
    const auto bytes = static_cast<int64_t>(fs::file_size(files[fi], ec));
    if (ec || bytes != inputs[fi].at("bytes").get<int64_t>() ||
        manifest::mtime_ns(files[fi]) != inputs[fi].at("mtime_ns").get<int64_t>())
      throw UserError(files[fi] + ": changed while prepare-data read it (size or mtime); run it again");
  }
}

// Tokenizes one file on `threads` threads (chunk_pipeline.h) and hands its documents, in
// file order, to `take`.
struct FileStats {
  int64_t documents = 0, sentences = 0, bytes = 0;
  uint64_t file_checksum = 0, file_bytes = 0;  // of the bytes on disk that were read (.gz: compressed)
  PipelineTimes times;
};
template <class Take>
FileStats stream_file(const std::string& file, DocumentFormat format, const Tokenizer& tok, int threads, Take take) {
  ChunkReader reader(file, format);
  FileStats st;
  ChunkPipeline p;
  p.threads = threads;
  p.window = static_cast<size_t>(threads) * 4;  // chunks in flight: memory O(threads x chunk)
  p.tokenize = [&](std::string_view text, ChunkResult& r) { tokenize_chunk(text, format, tok, r); };
  p.commit = [&](const ChunkResult& r, uint64_t offset) {
    if (r.bad_utf8 != std::string_view::npos)
      throw UserError(file + ": invalid UTF-8 at byte offset " + std::to_string(offset + r.bad_utf8));
    size_t sent = 0, tok_at = 0;
    for (const int64_t n_sent : r.doc_sentences) {
      const int64_t* lengths = r.sentence_lengths.data() + sent;
      int64_t doc_tokens = 0;
      for (int64_t i = 0; i < n_sent; ++i) doc_tokens += lengths[i];
      take(r.ids.data() + tok_at, r.starts.data() + tok_at, lengths, static_cast<size_t>(n_sent));
      st.sentences += n_sent;
      ++st.documents;
      sent += static_cast<size_t>(n_sent);
      tok_at += static_cast<size_t>(doc_tokens);
    }
  };
  st.times = run_chunk_pipeline(reader, p);
  st.bytes = static_cast<int64_t>(reader.bytes_read());
  st.file_checksum = reader.file_checksum();  // the whole file's: the pipeline read it to its end
  st.file_bytes = reader.file_bytes();
  if (st.documents == 0) throw UserError(file + ": no text (only blank lines)");
  return st;
}

// What the manifest records of a file once read: its documents, and the checksum of the very
// bytes that were tokenized (one read for both: a second, for the checksum alone, doubled the
// I/O of the longest data stage). A byte count other than the size stat() gave before the read:
// the file changed meanwhile.
void record_input(const std::string& file, const FileStats& st, json& identity) {
  const auto bytes = identity.at("bytes").get<int64_t>();
  if (static_cast<int64_t>(st.file_bytes) != bytes)
    throw UserError(file + ": changed while prepare-data read it (" + std::to_string(st.file_bytes) +
                    " bytes read, " + std::to_string(bytes) + " before); run it again");
  identity["documents"] = st.documents;
  identity["checksum"] = manifest::hex64(st.file_checksum);
}

json summary_json(const PrepareSummary& s) {
  return {{"documents", s.documents},         {"sentences", s.sentences},
          {"tokens", s.tokens},               {"words", s.words},
          {"bytes", s.bytes},                 {"train_documents", s.train_documents},
          {"valid_documents", s.valid_documents}, {"train_tokens", s.train_tokens},
          {"valid_tokens", s.valid_tokens},   {"train_shards", s.train_shards},
          {"valid_shards", s.valid_shards},   {"seconds", s.seconds},
          {"threads", s.threads}};
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
  r.threads = s.at("threads").get<int>();
  return r;
}

constexpr int kMaxPrepareThreads = 1024;

// A POSIX record lock on <out>/prepare.lock while this process checks and writes the folder: a
// second prepare-data on it (two jobs, or every node of one running the same script) waits for
// the first, then finds its shards up to date, instead of deleting the shards it is writing.
// Where the file system has no locks, a warning says that runs are not kept apart.
struct OutputLock {
  explicit OutputLock(const fs::path& dir)
      : lock((fs::create_directories(dir), dir / "prepare.lock"),
             dir.string() + ": another prepare-data is writing it; waiting for it to finish") {
    if (!lock.problem().empty())
      log::warn("data", "{}: cannot lock ({}); another prepare-data on this folder would not wait for this one",
                (dir / "prepare.lock").string(), lock.problem());
  }
  FileLock lock;
};

}  // namespace

PrepareSummary prepare_data(const DataOptions& d, const Tokenizer& tok, const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  require(!o.out_dir.empty(), "prepare-data: no output folder (give --out or data.shards)");
  // Checked before the output folder is cleared. Each thread holds four chunks in flight, and
  // starting 100000 threads took ~18 s before the system refused one: no machine needs more.
  require(o.threads >= 0 && o.threads <= kMaxPrepareThreads,
          "prepare-data: --threads " + std::to_string(o.threads) + " is out of range (0 = all cores, at most " +
              std::to_string(kMaxPrepareThreads) + ")");
  require_distinct_text_files(d);
  const OutputLock lock(o.out_dir);
  // Text deleted after preparing (docs/data.md: the shards are all training reads) leaves the
  // shards up to date; only a rebuild needs every input.
  json inputs = manifest::input_identities(d, /*missing_ok=*/true);
  const json settings = manifest::settings_of(d, tok);
  json old;
  if (!o.force && manifest::mismatch(o.out_dir, settings, inputs, &old).empty()) {
    for (const auto& f : inputs)
      if (f.contains("missing"))
        log::info("data", "{}: gone since prepare-data; its shards stand as prepared", f.at("path").get<std::string>());
    PrepareSummary s = summary_from(old);
    s.up_to_date = true;
    return s;
  }
  const DocumentFormat format = parse_document_format(d.document_format);
  inputs = inputs_to_read(d, format);  // errors before anything is cleared
  clear_output(o.out_dir);

  PrepareSummary sum;
  sum.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<int64_t> budget{o.fail_after_shards};
  std::atomic<int64_t>* fail_budget = o.fail_after_shards >= 0 ? &budget : nullptr;
  SplitWriter train(o.out_dir, "train", tok.vocab_size(), d.shard_tokens, fail_budget);
  SplitWriter valid(o.out_dir, "valid", tok.vocab_size(), d.shard_tokens, fail_budget);
  const int64_t period = holdout_period(d);
  int64_t train_doc_index = 0;

  std::vector<std::string> files = d.train_files;
  files.insert(files.end(), d.valid_files.begin(), d.valid_files.end());
  for (size_t fi = 0; fi < files.size(); ++fi) {
    const bool is_valid_file = fi >= d.train_files.size();
    const FileStats st =
        stream_file(files[fi], format, tok, sum.threads,
                    [&](const int32_t* ids, const uint8_t* starts, const int64_t* lengths, size_t sentences) {
                      const bool to_valid = is_valid_file || is_held_out(train_doc_index++, period);
                      (to_valid ? valid : train).add(ids, starts, lengths, sentences);
                    });
    sum.times += st.times;
    sum.sentences += st.sentences;
    sum.bytes += st.bytes;
    record_input(files[fi], st, inputs[fi]);  // its checksum: the same text is recognised moved or touched
    log::info("data", "{}: {} documents, {:.1f} MB", files[fi], st.documents, static_cast<double>(st.bytes) / 1e6);
  }
  train.flush();
  valid.flush();
  require_unchanged(files, inputs);
  if (train.tokens_ == 0) throw UserError(d.train_files.front() + ": the training files produced no tokens");
  if (valid.tokens_ == 0)
    log::warn("data", "no held-out documents ({} documents, data.valid_fraction {}): there will be no held-out loss; "
              "give data.valid_files, or more documents (data.document_format: {})",
              train.documents_, d.valid_fraction, d.document_format);

  sum.train_documents = train.documents_;
  sum.valid_documents = valid.documents_;
  sum.documents = sum.train_documents + sum.valid_documents;
  sum.train_tokens = train.tokens_;
  sum.valid_tokens = valid.tokens_;
  sum.tokens = sum.train_tokens + sum.valid_tokens;
  sum.words = train.words_ + valid.words_;
  sum.train_shards = static_cast<int64_t>(train.files().size());
  sum.valid_shards = static_cast<int64_t>(valid.files().size());
  sum.write_seconds = train.write_seconds_ + valid.write_seconds_;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const json m = {{"settings", settings},
                  {"inputs", inputs},
                  {"shards", {{"train", train.files()}, {"valid", valid.files()}}},
                  {"summary", summary_json(sum)}};
  write_file_atomic(o.out_dir / "manifest.json", m.dump(2) + "\n");
  return sum;
}

}  // namespace rpe
