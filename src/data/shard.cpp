// Shard writing (ShardBuilder) and memory-mapped reading (MappedShard); layout in shard.h.
#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
size_t pad8(size_t n) { return (n + 7) & ~size_t{7}; }

struct Header {
  char magic[8];
  uint32_t version, id_bytes;
  uint64_t vocab_size, tokens, sentences, documents, words, reserved;
};
static_assert(sizeof(Header) == kShardHeaderBytes);

// Byte size of a shard with these counts (header + padded sections).
uint64_t shard_bytes(uint32_t id_bytes, uint64_t n, uint64_t s, uint64_t d) {
  return kShardHeaderBytes + pad8(n * id_bytes) + pad8((n + 7) / 8) + 8 * s + 8 * d;
}
}  // namespace

void release_mapped(const void* data, size_t bytes) {
  if (bytes == 0) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Maps a file read-only at an address one page off a 2 MB boundary. The page cache holds
// written files in folios of up to 2 MB, and at a fault on an aligned map the kernel maps a
// whole 2 MB folio with one entry: a random read would put 2 MB in this process's RSS. Off
// the boundary it maps at most the fault-around window's pages. MAP_FAILED on failure.
void* map_off_huge_boundary(int fd, size_t bytes) {
  const size_t huge = size_t{2} << 20, page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t span = (bytes + page - 1) / page * page;
  void* reserved = ::mmap(nullptr, span + 2 * huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const uintptr_t base = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t at = ((base + huge - 1) & ~(huge - 1)) + page;
  void* map = ::mmap(reinterpret_cast<void*>(at), bytes, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (map == MAP_FAILED) {
    ::munmap(reserved, span + 2 * huge);
    return MAP_FAILED;
  }
  ::munmap(reserved, at - base);  // the unused ends of the reservation
  ::munmap(reinterpret_cast<void*>(at + span), base + span + 2 * huge - (at + span));
  return map;
}

void ShardHasher::mix(uint64_t w) {
  // h -> (h ^ w) * odd, then an xor-shift: each step is a bijection of h for a fixed w, so two
  // inputs differing in one word give different states from that word on.
  h_ = (h_ ^ w) * 0x9E3779B97F4A7C15ULL;
  h_ ^= h_ >> 32;
}

void ShardHasher::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += bytes;
  while (bytes > 0 && tail_bytes_ > 0) {  // finish a partial word first
    tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_);
    --bytes;
    if (++tail_bytes_ == 8) mix(tail_), tail_ = 0, tail_bytes_ = 0;
  }
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  for (; bytes > 0; --bytes) tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_++);
}

uint64_t ShardHasher::value() const {
  ShardHasher c = *this;
  if (c.tail_bytes_ > 0) c.mix(c.tail_);
  c.mix(total_);  // the length, so trailing zero words count
  return c.h_;
}

void ShardBuilder::add_document(const std::vector<Encoding>& sentences) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> starts;
  std::vector<int64_t> lengths;
  for (const auto& e : sentences) {
    ids.insert(ids.end(), e.ids.begin(), e.ids.end());
    starts.insert(starts.end(), e.word_start.begin(), e.word_start.end());
    lengths.push_back(static_cast<int64_t>(e.ids.size()));
  }
  add_document(ids.data(), starts.data(), lengths);
}

void ShardBuilder::add_document(const int32_t* ids, const uint8_t* word_start,
                                const std::vector<int64_t>& sentence_lengths) {
  add_document(ids, word_start, sentence_lengths.data(), sentence_lengths.size());
}

void ShardBuilder::add_document(const int32_t* ids, const uint8_t* word_start, const int64_t* sentence_lengths,
                                size_t sentences) {
  int64_t total = 0;
  for (size_t k = 0; k < sentences; ++k) total += sentence_lengths[k];
  if (total == 0) return;
  const uint64_t first = static_cast<uint64_t>(tokens());
  uint64_t end = first;
  for (size_t k = 0; k < sentences; ++k) {
    if (sentence_lengths[k] == 0) continue;
    end += static_cast<uint64_t>(sentence_lengths[k]);
    sentence_ends_.push_back(end);
  }
  // Bulk appends (this runs on prepare-data's one committing thread): ids, then the bits.
  ids_.insert(ids_.end(), ids, ids + total);
  word_bits_.resize((end + 7) / 8, 0);
  for (int64_t i = 0; i < total; ++i) {
    const uint64_t pos = first + static_cast<uint64_t>(i);
    word_bits_[pos >> 3] |= static_cast<uint8_t>((word_start[i] ? 1u : 0u) << (pos & 7));
    words_ += word_start[i] ? 1 : 0;
  }
  document_ends_.push_back(sentence_ends_.size());
}

TokenStream ShardBuilder::view() const {
  TokenStream s;
  s.ids = ids_.data();
  s.id_bytes = 4;
  s.word_bits = word_bits_.data();
  s.sentence_ends = sentence_ends_.data();
  s.document_ends = document_ends_.data();
  s.tokens = tokens();
  s.sentences = static_cast<int64_t>(sentence_ends_.size());
  s.documents = documents();
  return s;
}

void ShardBuilder::clear() {
  ids_.clear();
  word_bits_.clear();
  sentence_ends_.clear();
  document_ends_.clear();
  words_ = 0;
}

ShardFileInfo ShardBuilder::write(const fs::path& file, int64_t vocab_size) const {
  Header h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = kShardVersion;
  h.id_bytes = vocab_size <= 65536 ? 2 : 4;
  h.vocab_size = static_cast<uint64_t>(vocab_size);
  h.tokens = ids_.size();
  h.sentences = sentence_ends_.size();
  h.documents = document_ends_.size();
  h.words = static_cast<uint64_t>(words_);
  const char zeros[8] = {};
  ShardHasher hasher;
  write_atomic_with(file, [&](const fs::path& tmp) {
    hasher = ShardHasher();
    std::ofstream out(tmp, std::ios::binary);
    auto put = [&](const void* p, size_t n) {
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
      hasher.update(p, n);
    };
    put(&h, sizeof h);
    if (h.id_bytes == 2) {  // narrowed a block at a time: no second copy of the ids in memory
      std::vector<uint16_t> narrow;
      for (size_t at = 0; at < ids_.size(); at += narrow.size()) {
        narrow.assign(ids_.begin() + static_cast<std::ptrdiff_t>(at),
                      ids_.begin() + static_cast<std::ptrdiff_t>(std::min(ids_.size(), at + (size_t{1} << 16))));
        put(narrow.data(), narrow.size() * 2);
      }
    } else {
      put(ids_.data(), ids_.size() * 4);
    }
    const size_t id_len = ids_.size() * h.id_bytes;
    put(zeros, pad8(id_len) - id_len);
    put(word_bits_.data(), word_bits_.size());
    put(zeros, pad8(word_bits_.size()) - word_bits_.size());
    put(sentence_ends_.data(), sentence_ends_.size() * 8);
    put(document_ends_.data(), document_ends_.size() * 8);
    if (!out.flush()) throw UserError(file.string() + ": cannot write shard");
  });
  return {shard_bytes(h.id_bytes, h.tokens, h.sentences, h.documents), hasher.value()};
}

MappedShard::MappedShard(const fs::path& file) : file_(file) {
  const std::string name = file.string();
  // Non-blocking: opening a FIFO that stands in a shard's place would wait for a writer forever.
  const int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) throw UserError(name + ": cannot open shard (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(name + ": cannot open shard (not a regular file)");
  }
  bytes_ = static_cast<size_t>(st.st_size);
  if (bytes_ < kShardHeaderBytes) {
    ::close(fd);
    throw UserError(name + ": truncated shard (" + std::to_string(bytes_) + " bytes, the header alone needs 64)");
  }
  map_ = map_off_huge_boundary(fd, bytes_);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw UserError(name + ": cannot memory-map shard");
  }
  auto fail = [&](const std::string& what) {
    ::munmap(map_, bytes_);
    map_ = nullptr;
    throw UserError(name + ": " + what);
  };
  Header h;
  std::memcpy(&h, map_, sizeof h);
  release_mapped(map_, bytes_);  // (the kernel mapped 64 KB or more around it: not this process's to keep)
  if (std::memcmp(h.magic, kShardMagic, 8) != 0) fail("not an rpe-train shard (bad magic)");
  if (h.version != kShardVersion)
    fail("shard format version " + std::to_string(h.version) + ", this build reads version " +
         std::to_string(kShardVersion) + " (rerun prepare-data)");
  if (h.id_bytes != 2 && h.id_bytes != 4) fail("bad id size " + std::to_string(h.id_bytes) + " in shard header");
  if (h.tokens > (uint64_t{1} << 40) || h.sentences > h.tokens || h.documents > h.sentences)
    fail("corrupt shard header (impossible counts)");
  const uint64_t expected = shard_bytes(h.id_bytes, h.tokens, h.sentences, h.documents);
  if (expected != bytes_)
    fail("truncated or corrupt shard: header implies " + std::to_string(expected) + " bytes, file has " +
         std::to_string(bytes_));
  const auto* base = static_cast<const uint8_t*>(map_);
  size_t at = kShardHeaderBytes;
  stream_.ids = base + at;
  stream_.id_bytes = h.id_bytes;
  at += pad8(h.tokens * h.id_bytes);
  stream_.word_bits = base + at;
  at += pad8((h.tokens + 7) / 8);
  stream_.sentence_ends = reinterpret_cast<const uint64_t*>(base + at);
  at += 8 * h.sentences;
  stream_.document_ends = reinterpret_cast<const uint64_t*>(base + at);
  stream_.tokens = static_cast<int64_t>(h.tokens);
  stream_.sentences = static_cast<int64_t>(h.sentences);
  stream_.documents = static_cast<int64_t>(h.documents);
  vocab_size_ = static_cast<int64_t>(h.vocab_size);
  words_ = static_cast<int64_t>(h.words);
}

uint64_t MappedShard::verify(const uint64_t* expected) const {
  const std::string name = file_.string();
  auto fail = [&](const std::string& what) { throw UserError(name + ": " + what); };
  // Each pass reads the map in released pieces (scan_mapped): the scan of a whole shard
  // leaves none of it in this process's resident set.
  ShardHasher hasher;
  scan_mapped(map_, static_cast<int64_t>(bytes_), 1,
              [&](int64_t i, int64_t j) { hasher.update(static_cast<const char*>(map_) + i, static_cast<size_t>(j - i)); });
  const uint64_t sum = hasher.value();
  if (expected && sum != *expected) {
    char line[160];
    std::snprintf(line, sizeof line, "checksum %016llx differs from the manifest's %016llx (the file changed or is "
                  "corrupt: rerun prepare-data --force)", static_cast<unsigned long long>(sum),
                  static_cast<unsigned long long>(*expected));
    fail(line);
  }
  const uint64_t tokens = static_cast<uint64_t>(stream_.tokens), sentences = static_cast<uint64_t>(stream_.sentences);
  // Boundaries must increase and end at the totals, or packing would read out of range.
  auto increasing = [&](const uint64_t* ends, int64_t n, const char* what) {
    uint64_t prev = 0;
    scan_mapped(ends, n, 8, [&](int64_t i, int64_t j) {
      for (int64_t k = i; k < j; ++k) {
        if (ends[k] <= prev) fail(std::string("corrupt shard: ") + what + " ends do not increase");
        prev = ends[k];
      }
    });
    return prev;
  };
  const uint64_t last_sentence = increasing(stream_.sentence_ends, stream_.sentences, "sentence");
  if (stream_.sentences > 0 && last_sentence != tokens) fail("corrupt shard: sentences do not cover the tokens");
  const uint64_t last_document = increasing(stream_.document_ends, stream_.documents, "document");
  if (stream_.documents > 0 && last_document != sentences) fail("corrupt shard: documents do not cover the sentences");
  if (tokens > 0 && (stream_.sentences == 0 || stream_.documents == 0)) fail("corrupt shard: no document index");
  scan_mapped(stream_.ids, stream_.tokens, stream_.id_bytes, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      if (stream_.id(i) < 0 || stream_.id(i) >= vocab_size_)
        fail("corrupt shard: token " + std::to_string(i) + " has id " + std::to_string(stream_.id(i)) +
             " outside the vocabulary (" + std::to_string(vocab_size_) + ")");
  });
  release_mapped(map_, bytes_);  // what the kernel mapped around the last pieces' ends
  return sum;
}

MappedShard::~MappedShard() {
  if (map_) ::munmap(map_, bytes_);
}

}  // namespace rpe
