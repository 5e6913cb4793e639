// The checkpoint file format and its integrity check; what goes inside is train/checkpoint.h.
//
// A checkpoint is a LibTorch archive (torch::serialize::OutputArchive, a zip file) whose zip
// comment, the last field of the zip's end record that every zip reader skips (LibTorch,
// torch.jit.load, Python's zipfile), is the file's own checksum:
//     "rpe-train crc32 <8 hex digits> size <20 decimal digits>"        (50 bytes, the file's end)
// The CRC-32 and the size cover every byte before the comment. A flipped byte, a truncation or
// an append is caught before LibTorch reads anything, by every command that loads a checkpoint.
//
// Older files: checkpoints written before the checksum moved into the file have a sidecar
// "<file>.crc32" ("crc32 <hex> size <bytes>" of the whole file); they are verified against it.
// A file with neither (a truncated new file looks like this too) is refused unless the
// environment variable RPE_TRAIN_ALLOW_UNCHECKED=1 is set, which loads it with a warning.
#pragma once
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace rpe {

// Writes `archive` to `file` atomically (temporary file, fsync, rename) with the checksum
// embedded. A full disk or any write error: UserError naming `file` ("no space left on device:
// FILE"), the temporary file removed and an existing `file` left as it was.
void write_checkpoint_file(const std::filesystem::path& file, torch::serialize::OutputArchive& archive);

// True when `file` verifies (embedded checksum, else a sidecar, else the opt-in above);
// otherwise `why` says what failed, as a phrase to put after "FILE: ".
bool verify_checkpoint(const std::filesystem::path& file, std::string* why = nullptr);

// Verifies `file` and opens it; UserError "FILE: <why>" otherwise.
torch::serialize::InputArchive open_checkpoint(const std::filesystem::path& file);

// CRC-32 (IEEE 802.3, the zlib/PNG polynomial) of a whole file, streamed.
uint32_t file_crc32(const std::filesystem::path& file);

}  // namespace rpe
