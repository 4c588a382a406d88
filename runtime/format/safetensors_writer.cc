// SafetensorsWriter: serializes tensors into one safetensors file. Layout: 8-byte LE header
// length N, N bytes of JSON ("__metadata__" first, then tensors in name order, padded with spaces
// so that N % 8 == 0), then each tensor's bytes, contiguous, in name order. The file is written
// to path + ".tmp", flushed, fsync'ed and renamed over `path`, so readers never see half a file.
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/format/safetensors.h"

namespace df11 {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // readers reject larger headers
constexpr size_t kWriteChunkBytes = size_t{64} << 20;  // bytes per fwrite call

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// Returns shape x dtype size in bytes, or INVALID_ARGUMENT for a negative dimension, an unknown
// dtype or a product that overflows.
StatusOr<uint64_t> ExpectedBytes(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  const int elem = DTypeSize(dtype);
  if (elem == 0) return InvalidArgument("tensor " + Quote(name) + ": invalid dtype value");
  uint64_t bytes = static_cast<uint64_t>(elem);
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor " + Quote(name) + ": negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return InvalidArgument("tensor " + Quote(name) + ": shape overflows a 64-bit byte size");
    }
  }
  return bytes;
}

// Closes and deletes a partially written temporary file unless Commit() was reached.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)), file_(fopen(path_.c_str(), "wb")) {}
  ~TempFile() {
    if (file_ != nullptr) fclose(file_);
    if (!committed_) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  FILE* get() const { return file_; }
  const std::string& path() const { return path_; }

  // Writes all of `bytes`, in chunks of at most kWriteChunkBytes. `what` names them in errors.
  Status Write(std::span<const uint8_t> bytes, const std::string& what) {
    size_t done = 0;
    while (done < bytes.size()) {
      const size_t n = std::min(kWriteChunkBytes, bytes.size() - done);
      if (fwrite(bytes.data() + done, 1, n, file_) != n) {
        return Internal(path_ + ": write of " + what + " failed at file offset " + std::to_string(written_ + done) +
                        ": " + std::strerror(errno));
      }
      done += n;
    }
    written_ += done;
    return Status::Ok();
  }

  // Flushes, fsyncs, closes and renames onto `final_path`.
  Status Commit(const std::string& final_path) {
    FILE* f = file_;
    file_ = nullptr;
    const bool flushed = fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int flush_errno = errno;
    if (fclose(f) != 0 || !flushed) {
      return Internal(path_ + ": flush/close failed: " + std::strerror(flushed ? errno : flush_errno));
    }
    if (rename(path_.c_str(), final_path.c_str()) != 0) {
      return Internal(path_ + ": rename to " + final_path + " failed: " + std::strerror(errno));
    }
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string path_;
  FILE* file_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace

void SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> data) {
  pending_.push_back(Pending{std::move(name), dtype, std::move(shape), std::move(data), {}});
}

void SafetensorsWriter::AddView(std::string name, DType dtype, std::vector<int64_t> shape,
                                std::span<const uint8_t> data) {
  pending_.push_back(Pending{std::move(name), dtype, std::move(shape), {}, data});
}

void SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

Status SafetensorsWriter::Write(const std::string& path) const {
  const auto bytes_of = [](const Pending& p) {
    return p.owned.empty() ? p.view : std::span<const uint8_t>(p.owned);
  };
  std::vector<const Pending*> order;
  for (const Pending& p : pending_) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](const Pending* a, const Pending* b) { return a->name < b->name; });

  ordered_json header = ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;  // relative to the data section
  for (size_t i = 0; i < order.size(); ++i) {
    const Pending& p = *order[i];
    const std::string context = path + ": tensor " + Quote(p.name);
    if (p.name == "__metadata__") return InvalidArgument(context + ": the name is reserved");
    if (i > 0 && order[i - 1]->name == p.name) return InvalidArgument(context + ": duplicate tensor name");
    StatusOr<uint64_t> expected = ExpectedBytes(p.name, p.dtype, p.shape);
    if (!expected.ok()) return expected.status().WithContext(path);
    const uint64_t nbytes = bytes_of(p).size();
    if (nbytes != *expected) {
      return InvalidArgument(context + ": has " + std::to_string(nbytes) + " bytes but " + DTypeName(p.dtype) +
                             " x shape needs " + std::to_string(*expected));
    }
    ordered_json entry = ordered_json::object();
    entry["dtype"] = DTypeName(p.dtype);
    entry["shape"] = p.shape;
    entry["data_offsets"] = {offset, offset + nbytes};
    header[p.name] = std::move(entry);
    offset += nbytes;  // cannot overflow: every tensor is resident in memory
  }

  std::string text;
  try {
    text = header.dump(-1, ' ', false, ordered_json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": a tensor name or metadata string is not valid UTF-8: " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes) {
    return InvalidArgument(path + ": header would be " + std::to_string(text.size()) + " bytes, over the " +
                           std::to_string(kMaxHeaderBytes) + "-byte limit");
  }

  TempFile tmp(path + ".tmp");
  if (tmp.get() == nullptr) return Internal(tmp.path() + ": cannot create: " + std::strerror(errno));
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  DF11_RETURN_IF_ERROR(tmp.Write(length, "header length"));
  DF11_RETURN_IF_ERROR(tmp.Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, "header"));
  for (const Pending* p : order) DF11_RETURN_IF_ERROR(tmp.Write(bytes_of(*p), "tensor " + Quote(p->name)));
  return tmp.Commit(path);
}

}  // namespace df11
