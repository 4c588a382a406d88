// safetensors: a validating, mmap-backed reader and a writer for the safetensors format
// (https://github.com/huggingface/safetensors). Validation follows the Rust reference crate:
// 8-byte little-endian header length N (N <= 100,000,000), a JSON header that starts with '{',
// no duplicate tensor names, known dtypes, data_offsets contiguous from 0 to the end of the file,
// and shape x dtype size == data length, every product checked for overflow.
// Thread-safety: a SafetensorsFile / TensorStore is immutable after Open and safe to share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace df11 {

enum class DType { kBool, kU8, kI8, kU16, kI16, kF16, kBF16, kU32, kI32, kF32, kU64, kI64, kF64, kF8E4M3, kF8E5M2 };

// Size of one element in bytes.
int DTypeSize(DType dtype);
// Safetensors spelling: "BF16", "U8", "I64", ...
const char* DTypeName(DType dtype);
// Parses the safetensors spelling; NOT ok for an unknown dtype.
StatusOr<DType> ParseDType(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset of the data in the file
  uint64_t nbytes = 0;
  int64_t numel() const;  // product of shape (1 for a scalar); -1 if a dim is negative or it overflows
};
// "[d0, d1, ...]", for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

// One safetensors file, memory-mapped read-only.
class SafetensorsFile {
 public:
  // Opens and validates `path`. Errors name the file and what is wrong: NOT_FOUND (no such file),
  // DATA_LOSS (malformed bytes: short file, bad header length/JSON/UTF-8, overlapping, gapped or
  // out-of-range data_offsets, trailing bytes), INVALID_ARGUMENT (a directory, or a bad value in a
  // well-formed header: unknown dtype/field, negative or overflowing shape, size mismatch, duplicate).
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses an in-memory copy of a file (tests, fuzzing). `name` is used in error messages.
  static StatusOr<std::unique_ptr<SafetensorsFile>> FromBytes(std::string name, std::span<const uint8_t> bytes);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // All tensors, in data-offset order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  // The tensor's bytes (valid while this file lives).
  std::span<const uint8_t> Data(const TensorInfo& info) const;
  // "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;        // mmap'd region (Open) or nullptr
  std::vector<uint8_t> owned_;     // bytes owned (FromBytes)
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Every *.safetensors file of a directory (or one file) seen as one tensor namespace. Matches
// tensors by name across files; never depends on file names. When the directory has a
// model.safetensors.index.json its weight_map is checked against the files.
class TensorStore {
 public:
  // A directory: all *.safetensors in it. A file path: that file alone.
  // Errors: no safetensors files, a tensor name present in two files (both named), an index
  // whose weight_map names a missing file or tensor.
  static StatusOr<TensorStore> Open(const std::string& path);

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };
  // nullptr-file entry when absent.
  Entry Find(std::string_view name) const;
  std::span<const uint8_t> Data(const Entry& e) const { return e.file->Data(*e.info); }
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// Writes one safetensors file. Tensors are written in name order, the header is padded with
// spaces to a multiple of 8 bytes. Data passed as a span must stay alive until Write returns.
class SafetensorsWriter {
 public:
  void Add(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> data);
  void AddView(std::string name, DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> data);
  void SetMetadata(std::string key, std::string value);
  // Fails on a duplicate name or a size that does not match shape x dtype. Writes path.tmp then renames.
  Status Write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> owned;
    std::span<const uint8_t> view;
  };
  std::vector<Pending> pending_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace df11
