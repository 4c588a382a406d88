// safetensors reader: dtype table, header validation, the mmap-backed SafetensorsFile and the
// multi-file TensorStore. The writer lives in safetensors_writer.cc.
//
// Error codes: DATA_LOSS when the bytes are not a well-formed file (short file, bad header
// length, header not UTF-8 / not JSON / not starting with '{', data_offsets that overlap, leave a
// gap, end before they begin or run past the end, trailing bytes); INVALID_ARGUMENT when the
// header is well-formed JSON but holds a bad value (unknown dtype or field, wrong JSON type,
// negative or overflowing shape, shape x dtype size != data length, duplicate tensor name).
// Every message starts with the file path, then the tensor name where there is one.
#include "runtime/format/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "kernels/base/utf8.h"

namespace df11 {
namespace {

using json = nlohmann::json;

constexpr uint64_t kHeaderLengthBytes = 8;
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // same limit as the Rust crate
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kIndexFileName = "model.safetensors.index.json";

struct DTypeEntry {
  DType dtype;
  const char* name;
  int size;  // bytes per element
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "BOOL", 1}, {DType::kU8, "U8", 1},       {DType::kI8, "I8", 1},
    {DType::kU16, "U16", 2},   {DType::kI16, "I16", 2},     {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kU32, "U32", 4},     {DType::kI32, "I32", 4},
    {DType::kF32, "F32", 4},   {DType::kU64, "U64", 8},     {DType::kI64, "I64", 8},
    {DType::kF64, "F64", 8},   {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
};

const DTypeEntry* FindDType(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string OffsetsString(uint64_t begin, uint64_t end) {
  return "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Maps an errno from open/stat to a Status naming `path`.
Status ErrnoStatus(int err, const std::string& path, const std::string& what) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return NotFound(msg);
  if (err == EACCES || err == EPERM) return Status(StatusCode::kPermissionDenied, msg);
  return Internal(msg);
}

// Owns a file descriptor; closes it on scope exit.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A file must hold at least the 8-byte header length.
Status CheckMinimumSize(const std::string& path, uint64_t size) {
  if (size == 0) return DataLoss(path + ": file is empty (0 bytes); expected an 8-byte header length");
  if (size < kHeaderLengthBytes) {
    return DataLoss(path + ": file is " + std::to_string(size) +
                    " bytes, shorter than the 8-byte header length");
  }
  return Status::Ok();
}

// Returns N, the little-endian u64 at the start of the file, after checking the header fits.
StatusOr<uint64_t> ReadHeaderLength(const std::string& path, const uint8_t* base, uint64_t size) {
  DF11_RETURN_IF_ERROR(CheckMinimumSize(path, size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeaderBytes) {
    return DataLoss(path + ": header length " + std::to_string(n) + " exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > size - kHeaderLengthBytes) {
    return DataLoss(path + ": truncated header: header length is " + std::to_string(n) +
                    " bytes but the file has only " + std::to_string(size - kHeaderLengthBytes) +
                    " bytes after the 8-byte length");
  }
  return n;
}

// Thrown only inside ParseHeaderJson's parser callback and caught there.
struct HeaderShapeError {
  std::string message;
};

// Parses the header text into a JSON object. Rejects duplicate keys in any object (nlohmann
// would silently keep the last one) and nesting deeper than a safetensors header needs
// (root -> tensor -> shape array), which also bounds memory and recursion on hostile input.
StatusOr<json> ParseHeaderJson(const std::string& path, std::string_view text) {
  std::vector<std::set<std::string>> keys_per_object;  // one set per open object
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > 2) throw HeaderShapeError{"JSON nested deeper than a safetensors header allows"};
        if (event == json::parse_event_t::object_start) keys_per_object.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_per_object.empty()) keys_per_object.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys_per_object.empty() && !keys_per_object.back().insert(key).second) {
          throw HeaderShapeError{depth == 1 ? "duplicate tensor name " + Quote(key)
                                            : "duplicate key " + Quote(key)};
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const HeaderShapeError& e) {
    return InvalidArgument(path + ": header: " + e.message);
  } catch (const json::exception& e) {
    return DataLoss(path + ": header is not valid JSON: " + e.what());
  }
}

// Checks the header bytes are UTF-8 and start with '{' (the Rust crate's first two checks).
Status CheckHeaderText(const std::string& path, std::string_view text) {
  const size_t bad = FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return DataLoss(path + ": header is not valid UTF-8 (bad byte at file offset " +
                    std::to_string(bad + kHeaderLengthBytes) + ")");
  }
  if (text.empty() || text.front() != '{') {
    return DataLoss(path + ": header does not start with '{' (file offset 8)");
  }
  return Status::Ok();
}

StatusOr<std::map<std::string, std::string>> ParseMetadata(const std::string& path, const json& value) {
  std::map<std::string, std::string> out;
  if (value.is_null()) return out;  // the Rust crate reads null as "no metadata"
  if (!value.is_object()) {
    return InvalidArgument(path + ": __metadata__ must be an object of strings, got " +
                           value.type_name());
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return InvalidArgument(path + ": __metadata__ key " + Quote(key) + " must map to a string, got " +
                             v.type_name());
    }
    out.emplace(key, v.get<std::string>());
  }
  return out;
}

// One header entry; begin/end are relative to the start of the data section.
struct ParsedTensor {
  TensorInfo info;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// `context` is "path: tensor 'name'".
StatusOr<std::vector<int64_t>> ParseShape(const std::string& context, const json& value) {
  if (!value.is_array()) return InvalidArgument(context + ": shape must be an array, got " + value.type_name());
  std::vector<int64_t> shape;
  for (const json& dim : value) {
    if (dim.is_number_unsigned()) {
      const auto d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument(context + ": shape dimension " + std::to_string(d) + " overflows int64");
      }
      shape.push_back(static_cast<int64_t>(d));
    } else if (dim.is_number_integer()) {
      return InvalidArgument(context + ": negative shape dimension " + std::to_string(dim.get<int64_t>()));
    } else {
      return InvalidArgument(context + ": shape dimension must be a non-negative integer, got " + dim.dump());
    }
  }
  return shape;
}

StatusOr<std::pair<uint64_t, uint64_t>> ParseOffsets(const std::string& context, const json& value) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_unsigned() ||
      !value[1].is_number_unsigned()) {
    return InvalidArgument(context + ": data_offsets must be two non-negative integers [begin, end], got " +
                           value.dump());
  }
  const auto begin = value[0].get<uint64_t>(), end = value[1].get<uint64_t>();
  if (begin > end) return DataLoss(context + ": " + OffsetsString(begin, end) + " end before they begin");
  return std::make_pair(begin, end);
}

// Returns numel x dtype size in bytes, or an error if any partial product overflows
// (like the Rust crate, a later zero dimension does not excuse an earlier overflow).
StatusOr<uint64_t> ByteSize(const std::string& context, DType dtype, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(numel, d, &numel)) {
      return InvalidArgument(context + ": shape " + ShapeString(shape) + " has more than 2^63 elements");
    }
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(DTypeSize(dtype)), &nbytes)) {
    return InvalidArgument(context + ": shape " + ShapeString(shape) + " x " + DTypeName(dtype) +
                           " overflows 64-bit byte size");
  }
  return nbytes;
}

StatusOr<ParsedTensor> ParseTensorEntry(const std::string& path, const std::string& name, const json& value) {
  const std::string context = path + ": tensor " + Quote(name);
  if (!value.is_object()) return InvalidArgument(context + ": entry must be an object, got " + value.type_name());
  for (const auto& [key, v] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return InvalidArgument(context + ": unknown field " + Quote(key));
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) return InvalidArgument(context + ": missing field " + Quote(field));
  }
  const json& dtype = value["dtype"];
  if (!dtype.is_string()) return InvalidArgument(context + ": dtype must be a string, got " + dtype.dump());
  ParsedTensor t;
  t.info.name = name;
  StatusOr<DType> parsed_dtype = ParseDType(dtype.get_ref<const std::string&>());
  if (!parsed_dtype.ok()) return parsed_dtype.status().WithContext(context);
  t.info.dtype = *parsed_dtype;
  DF11_ASSIGN_OR_RETURN(t.info.shape, ParseShape(context, value["shape"]));
  DF11_ASSIGN_OR_RETURN(std::tie(t.begin, t.end), ParseOffsets(context, value["data_offsets"]));
  DF11_ASSIGN_OR_RETURN(t.info.nbytes, ByteSize(context, t.info.dtype, t.info.shape));
  return t;
}

// Checks that the tensors (sorted by offsets) tile [0, data_size) exactly and that each holds
// shape x dtype bytes; sets each info.offset to `data_start` + begin.
Status CheckLayout(const std::string& path, std::vector<ParsedTensor>& tensors, uint64_t data_start,
                   uint64_t data_size) {
  uint64_t expected = 0;  // where the next tensor must begin
  const std::string* previous = nullptr;
  for (ParsedTensor& t : tensors) {
    const std::string context = path + ": tensor " + Quote(t.info.name) + ": " + OffsetsString(t.begin, t.end);
    if (t.begin < expected) {
      return DataLoss(context + " overlap the previous tensor " + Quote(*previous) + ", which ends at " +
                      std::to_string(expected));
    }
    if (t.begin > expected) {
      return DataLoss(context + ": gap of " + std::to_string(t.begin - expected) + " bytes before it (" +
                      (previous ? "previous tensor " + Quote(*previous) + " ends" : "data starts") + " at " +
                      std::to_string(expected) + ")");
    }
    if (t.end > data_size) {
      return DataLoss(context + " run past the end of the data section, which has " +
                      std::to_string(data_size) + " bytes (file truncated?)");
    }
    if (t.end - t.begin != t.info.nbytes) {
      return InvalidArgument(context + " hold " + std::to_string(t.end - t.begin) + " bytes but " +
                             DTypeName(t.info.dtype) + " x shape " + ShapeString(t.info.shape) + " needs " +
                             std::to_string(t.info.nbytes));
    }
    t.info.offset = data_start + t.begin;
    expected = t.end;
    previous = &t.info.name;
  }
  if (expected != data_size) {
    return DataLoss(path + ": " + std::to_string(data_size - expected) + " trailing bytes after the last tensor" +
                    (previous ? " " + Quote(*previous) : std::string()) + " (data ends at file offset " +
                    std::to_string(data_start + expected) + ", file is " + std::to_string(data_start + data_size) +
                    " bytes)");
  }
  return Status::Ok();
}

using EntryMap = std::map<std::string, TensorStore::Entry, std::less<>>;

// Adds every tensor of `file` to `entries`; a name already present is an error naming both files.
Status AddFileEntries(const SafetensorsFile& file, EntryMap& entries) {
  for (const TensorInfo& info : file.tensors()) {
    auto [it, inserted] = entries.try_emplace(info.name, TensorStore::Entry{&file, &info});
    if (!inserted) {
      return InvalidArgument("tensor " + Quote(info.name) + " is present in both " + it->second.file->path() +
                             " and " + file.path());
    }
  }
  return Status::Ok();
}

// The *.safetensors regular files (symlinks followed) directly inside `dir`, sorted by file name.
StatusOr<std::vector<std::filesystem::path>> ListSafetensors(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> out;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->path().extension() == ".safetensors" && it->is_regular_file(type_ec)) out.push_back(it->path());
  }
  if (ec) return ErrnoStatus(ec.value(), dir.string(), "cannot list directory");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.filename() < b.filename(); });
  return out;
}

// Reads and parses model.safetensors.index.json; returns its weight_map (tensor -> file name).
StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, index_path, "cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  json root;
  try {
    root = json::parse(text.str());
  } catch (const json::exception& e) {
    return DataLoss(index_path + ": malformed index JSON: " + e.what());
  }
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object()) {
    return InvalidArgument(index_path + ": index must be a JSON object with a \"weight_map\" object");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, file] : root["weight_map"].items()) {
    if (!file.is_string()) {
      return InvalidArgument(index_path + ": weight_map entry for tensor " + Quote(tensor) +
                             " must be a file name string, got " + file.dump());
    }
    weight_map.emplace(tensor, file.get<std::string>());
  }
  return weight_map;
}

// Checks that every tensor of the index's weight_map lives in exactly the file it names.
Status CheckIndex(const std::string& index_path, const EntryMap& entries,
                  const std::vector<std::unique_ptr<SafetensorsFile>>& files) {
  DF11_ASSIGN_OR_RETURN(const auto weight_map, ReadWeightMap(index_path));
  for (const auto& mapping : weight_map) {
    const std::string& tensor = mapping.first;
    const std::string& file_name = mapping.second;  // named: clang 14 cannot capture bindings
    const auto named = std::find_if(files.begin(), files.end(), [&](const auto& f) {
      return std::filesystem::path(f->path()).filename() == file_name;
    });
    if (named == files.end()) {
      return NotFound(index_path + ": weight_map puts tensor " + Quote(tensor) + " in " + Quote(file_name) +
                      ", which is not a safetensors file of this directory");
    }
    const auto it = entries.find(tensor);
    if (it == entries.end()) {
      return NotFound(index_path + ": tensor " + Quote(tensor) + " is in the weight_map but not in " +
                      (*named)->path() + " nor any other file");
    }
    if (it->second.file != named->get()) {
      return DataLoss(index_path + ": weight_map puts tensor " + Quote(tensor) + " in " + (*named)->path() +
                      " but it is in " + it->second.file->path());
    }
  }
  return Status::Ok();
}

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int DTypeSize(DType dtype) {
  const DTypeEntry* e = FindDType(dtype);
  return e ? e->size : 0;
}

const char* DTypeName(DType dtype) {
  const DTypeEntry* e = FindDType(dtype);
  return e ? e->name : "INVALID_DTYPE";
}

StatusOr<DType> ParseDType(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return InvalidArgument("unknown dtype " + Quote(name));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, path, "cannot open");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, path, "cannot stat");
  if (S_ISDIR(st.st_mode)) return InvalidArgument(path + ": is a directory, not a safetensors file");
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  DF11_RETURN_IF_ERROR(CheckMinimumSize(path, size));  // also keeps mmap away from 0 bytes
  void* mapping = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED) return ErrnoStatus(errno, path, "cannot mmap " + std::to_string(size) + " bytes");
  // NOTE: the mapping outlives the descriptor. If another process truncates the file while it is
  // mapped, reads past the new end fault (SIGBUS); model files are treated as immutable.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = mapping;
  file->base_ = static_cast<const uint8_t*>(mapping);
  file->size_ = size;
  DF11_RETURN_IF_ERROR(file->Parse());
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(std::string name,
                                                                      std::span<const uint8_t> bytes) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(name);
  file->owned_.assign(bytes.begin(), bytes.end());
  file->base_ = file->owned_.data();
  file->size_ = file->owned_.size();
  DF11_RETURN_IF_ERROR(file->Parse());
  return file;
}

Status SafetensorsFile::Parse() {
  DF11_ASSIGN_OR_RETURN(const uint64_t header_len, ReadHeaderLength(path_, base_, size_));
  const std::string_view text(reinterpret_cast<const char*>(base_) + kHeaderLengthBytes, header_len);
  DF11_RETURN_IF_ERROR(CheckHeaderText(path_, text));
  DF11_ASSIGN_OR_RETURN(const json root, ParseHeaderJson(path_, text));
  if (!root.is_object()) return DataLoss(path_ + ": header is not a JSON object");
  std::vector<ParsedTensor> parsed;
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey) {
      DF11_ASSIGN_OR_RETURN(metadata_, ParseMetadata(path_, value));
      continue;
    }
    DF11_ASSIGN_OR_RETURN(ParsedTensor t, ParseTensorEntry(path_, name, value));
    parsed.push_back(std::move(t));
  }
  std::sort(parsed.begin(), parsed.end(), [](const ParsedTensor& a, const ParsedTensor& b) {
    return std::tie(a.begin, a.end, a.info.name) < std::tie(b.begin, b.end, b.info.name);
  });
  const uint64_t data_start = kHeaderLengthBytes + header_len;
  DF11_RETURN_IF_ERROR(CheckLayout(path_, parsed, data_start, size_ - data_start));
  tensors_.reserve(parsed.size());
  for (ParsedTensor& t : parsed) {
    index_.emplace(t.info.name, tensors_.size());
    tensors_.push_back(std::move(t.info));
  }
  return Status::Ok();
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::Data(const TensorInfo& info) const {
  // NOTE: guards against a TensorInfo from another file; never true for our own tensors.
  if (info.offset > size_ || info.nbytes > size_ - info.offset) return {};
  return {base_ + info.offset, static_cast<size_t>(info.nbytes)};
}


StatusOr<TensorStore> TensorStore::Open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return NotFound(path + ": no such file or directory");
  std::vector<fs::path> paths = {fs::path(path)};
  if (fs::is_directory(status)) {
    DF11_ASSIGN_OR_RETURN(paths, ListSafetensors(path));
    if (paths.empty()) return NotFound(path + ": directory has no *.safetensors files");
  }
  TensorStore store;
  for (const fs::path& p : paths) {
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(p.string()));
    DF11_RETURN_IF_ERROR(AddFileEntries(*file, store.entries_));
    store.files_.push_back(std::move(file));
  }
  const fs::path index_path = fs::path(path) / kIndexFileName;
  if (fs::is_directory(status) && fs::exists(index_path, ec)) {
    DF11_RETURN_IF_ERROR(CheckIndex(index_path.string(), store.entries_, store.files_));
  }
  return store;
}

TensorStore::Entry TensorStore::Find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? Entry{nullptr, nullptr} : it->second;
}

std::vector<std::string> TensorStore::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

}  // namespace df11
