// A corpus file read once, front to back, for both of prepare-data's needs: its text (gunzipped
// when it is gzip) for the tokenizer, and the checksum of its bytes on disk for the manifest.
// Reading the file a second time for the checksum doubled the I/O of the longest data stage
// (~20 GB of text at paper scale, often on a network file system). The checksum is ShardHasher
// over the raw bytes in file order, the value file_checksum() gives, so manifests written when
// it was a separate read stay valid.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace rpe {

class HashedInput {
 public:
  // UserError naming the file when it cannot be opened. gunzip: a file that starts with the gzip
  // magic bytes is decompressed (zlib's gzread rule, whatever its name); otherwise it is text.
  HashedInput(const std::filesystem::path& file, bool gunzip);
  ~HashedInput();
  HashedInput(const HashedInput&) = delete;
  HashedInput& operator=(const HashedInput&) = delete;

  // Up to `n` bytes of text into `dst`; 0 at the end of the file. UserError naming the file on a
  // read error, or a corrupt or cut-off gzip stream (half a corpus must not read as a whole one).
  size_t read(char* dst, size_t n);
  // Of the raw bytes read so far: the whole file's once read() has returned 0.
  uint64_t checksum() const;
  uint64_t raw_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The checksum of a file's bytes (HashedInput's, read without decompressing): the value
// manifest.json records for each input and for the tokenizer model.
uint64_t file_checksum(const std::filesystem::path& file);

}  // namespace rpe
