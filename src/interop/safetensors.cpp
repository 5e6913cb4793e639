// safetensors I/O with nlohmann/json for the header (format summary in safetensors.h).
// Tensors are read straight into their own storage (no whole-file buffer), so a
// 1.3 GB BERT-large file needs 1.3 GB, not twice that.
#include "interop/safetensors.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <system_error>

#include "util/atomic_file.h"
#include "util/atomic_writer.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"

namespace rpe {
namespace fs = std::filesystem;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so is this reader");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit (100 MB)

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
    {"F64", torch::kFloat64}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
};

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& d : kDtypes) names.emplace_back(d.name);
  return names;
}

// One header entry's dtype, shape and byte span, each checked against the data buffer's size.
struct EntryLayout {
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0, nbytes = 0;
};

EntryLayout parse_entry(const std::string& where, const std::string& name, const json& entry, uint64_t data_size) {
  auto bad = [&](const std::string& msg) -> void { throw UserError(where + ": tensor '" + name + "': " + msg); };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    bad("header entry needs dtype, shape and data_offsets");
  if (!entry["dtype"].is_string()) bad("dtype is not a string");
  const std::string dtype = entry["dtype"].get<std::string>();
  const DtypeInfo* info = nullptr;
  for (const auto& d : kDtypes)
    if (dtype == d.name) info = &d;
  if (!info) bad("unsupported dtype " + dtype + " (supported: " + join(dtype_names()) + ")");

  std::vector<int64_t> shape;
  if (!entry["shape"].is_array()) bad("shape is not a list");
  // Element and byte counts are multiplied with overflow checks: a shape such as
  // [2^62, 4] must not wrap around to a size that matches the offsets.
  uint64_t numel = 1;
  for (const auto& s : entry["shape"]) {
    if (!s.is_number_unsigned()) bad("shape holds a non-integer or negative size");
    const uint64_t dim = s.get<uint64_t>();
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
      bad("shape " + entry["shape"].dump() + " has more elements than fit in 64 bits");
    shape.push_back(static_cast<int64_t>(dim));
  }
  if (shape.size() > 64) bad("shape has " + std::to_string(shape.size()) + " dimensions");
  const auto& offs = entry["data_offsets"];
  if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
    bad("data_offsets must be two non-negative integers");
  const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(c10::elementSize(info->type)), &nbytes))
    bad("shape " + entry["shape"].dump() + " needs more bytes than fit in 64 bits");
  if (end < begin || end - begin != nbytes)
    bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") do not hold " +
        std::to_string(numel) + " " + dtype + " values");
  if (end > data_size)
    bad("truncated safetensors file: data ends at byte " + std::to_string(end) + " of a " +
        std::to_string(data_size) + "-byte buffer");
  return {info->type, std::move(shape), begin, end, nbytes};
}

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.type == dtype) return d.name;
  throw UserError(std::string("safetensors: cannot store dtype ") + c10::toString(dtype));
}

SafetensorsFile read_safetensors(const fs::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw UserError(where + ": is a folder, not a safetensors file");
  require_regular_file(file);  // the open below would block on a FIFO
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UserError(where + ": cannot open safetensors file: " + std::strerror(errno));
  const uint64_t file_size = fs::file_size(file, ec);
  if (ec) throw UserError(where + ": cannot read safetensors file: " + ec.message());
  auto fail = [&](const std::string& msg) -> void { throw UserError(where + ": " + msg); };

  if (file_size < 8) fail("truncated safetensors file (" + std::to_string(file_size) + " bytes, no header length)");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > kMaxHeaderBytes) fail("safetensors header length " + std::to_string(header_len) + " is implausible");
  if (8 + header_len > file_size)
    fail("truncated safetensors file: header needs " + std::to_string(header_len) + " bytes, file has " +
         std::to_string(file_size - 8) + " after the length");
  std::string header_text(header_len, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_len));

  // A valid header nests 3 levels (entries, their fields, a shape).
  const json header = parse_json_text(header_text, where + ": safetensors header", 8);
  if (!header.is_object()) fail("safetensors header is not a JSON object");

  // Every entry is checked, overlaps included, before anything is allocated: disjoint spans
  // within the buffer add up to at most the file's size, whatever the header claims.
  const uint64_t data_size = file_size - 8 - header_len;
  SafetensorsFile out;
  std::vector<std::pair<std::string, EntryLayout>> entries;
  for (const auto& item : header.items()) {
    // Named variables, not a structured binding: clang (the fuzz build) cannot capture those.
    const std::string name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    entries.emplace_back(name, parse_entry(where, name, entry, data_size));
  }
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, e] : entries) spans.emplace_back(e.begin, e.end);
  std::sort(spans.begin(), spans.end());
  // The tensors tile the buffer exactly, as the safetensors library requires of what it loads:
  // a gap or bytes past the last tensor mean a file that save_file did not write as it stands.
  uint64_t covered = 0;
  for (const auto& [b, e] : spans) {
    if (b < covered) fail("safetensors tensors overlap in the data buffer");
    if (b > covered) fail("safetensors data buffer has unused bytes [" + std::to_string(covered) + ", " +
                          std::to_string(b) + ") between tensors");
    covered = e;
  }
  if (covered != data_size)
    fail("safetensors data buffer has " + std::to_string(data_size - covered) + " bytes after its last tensor");

  for (const auto& [name, e] : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.nbytes));
    if (!in) throw UserError(where + ": tensor '" + name + "': read error");
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

void write_safetensors(const fs::path& file, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the tensors in the caller's order, which is also the data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();

  AtomicWriter out(file);  // a write error names the file and says why (errno)
  out.write(&len, 8);
  out.write(text);
  for (const auto& t : data) out.write(t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size()));
  out.commit();
}

}  // namespace rpe
