// Tests for runtime/format/safetensors: dtype table, a hand-made file, writer round trips, every
// validation rule of the reader (code + message), and TensorStore over directories.
#include "runtime/format/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace df11 {
namespace {

namespace fs = std::filesystem;

constexpr DType kAllDTypes[] = {DType::kBool, DType::kU8,  DType::kI8,  DType::kU16,    DType::kI16,
                                DType::kF16,  DType::kBF16, DType::kU32, DType::kI32,    DType::kF32,
                                DType::kU64,  DType::kI64, DType::kF64, DType::kF8E4M3, DType::kF8E5M2};

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// A file image: the 8-byte LE `length` (default: header size), the header text, then `data`.
std::vector<uint8_t> MakeFile(std::string_view header, std::vector<uint8_t> data = {},
                              std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Expects FromBytes("bad.safetensors", bytes) to fail with `code` and a message holding every needle.
void ExpectError(const std::vector<uint8_t>& bytes, StatusCode code, const std::vector<std::string>& needles) {
  auto result = SafetensorsFile::FromBytes("bad.safetensors", bytes);
  ASSERT_FALSE(result.ok()) << "accepted a bad file";
  const Status& s = result.status();
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find("bad.safetensors"), std::string::npos) << s.ToString();
  for (const std::string& needle : needles) {
    EXPECT_NE(s.message().find(needle), std::string::npos) << "missing '" << needle << "' in " << s.ToString();
  }
}

// A header holding one entry "a" with the given fields (verbatim JSON).
std::string OneTensor(std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return std::string(R"({"a":{"dtype":)") + std::string(dtype) + R"(,"shape":)" + std::string(shape) +
         R"(,"data_offsets":)" + std::string(offsets) + "}}";
}

TEST(SafetensorsDTypeTest, NamesSizesAndParsing) {
  const char* names[] = {"BOOL", "U8",  "I8",  "U16", "I16", "F16", "BF16",    "U32",
                         "I32",  "F32", "U64", "I64", "F64", "F8_E4M3", "F8_E5M2"};
  const int sizes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 1, 1};
  for (size_t i = 0; i < std::size(kAllDTypes); ++i) {
    EXPECT_STREQ(DTypeName(kAllDTypes[i]), names[i]);
    EXPECT_EQ(DTypeSize(kAllDTypes[i]), sizes[i]) << names[i];
    auto parsed = ParseDType(names[i]);
    ASSERT_TRUE(parsed.ok()) << names[i];
    EXPECT_EQ(*parsed, kAllDTypes[i]);
  }
  for (const char* bad : {"f32", "F4", "", "BF16 ", "F8_E8M0"}) {
    auto parsed = ParseDType(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(SafetensorsDTypeTest, NumelHandlesScalarZeroAndOverflow) {
  TensorInfo t;
  EXPECT_EQ(t.numel(), 1);
  t.shape = {2, 0, 5};
  EXPECT_EQ(t.numel(), 0);
  t.shape = {3, 4};
  EXPECT_EQ(t.numel(), 12);
  t.shape = {int64_t{1} << 62, 4};
  EXPECT_EQ(t.numel(), -1);
}

// The hand-made file: header text and every data byte written out literally, not by the writer.
// Tensors are listed out of data order; the header is 195 bytes (unaligned, 3 trailing spaces).
constexpr char kHandHeader[] =
    R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
    R"("s":{"dtype":"I16","shape":[],"data_offsets":[0,2]},"m":{"dtype":"U8","shape":[2,1],"data_offsets":[2,4]}}   )";
static_assert(sizeof(kHandHeader) - 1 == 0xC3);
const std::vector<uint8_t> kHandLength = {0xC3, 0, 0, 0, 0, 0, 0, 0};
const std::vector<uint8_t> kHandData = {0xFE, 0xFF,                    // s: I16 -2
                                        0x07, 0x09,                    // m: U8 [[7], [9]]
                                        0x00, 0x00, 0x80, 0x3F,        // w[0]: F32 1.0
                                        0x00, 0x00, 0x20, 0xC0};       // w[1]: F32 -2.5

void CheckHandMade(const SafetensorsFile& f) {
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "s");  // data-offset order
  EXPECT_EQ(f.tensors()[1].name, "m");
  EXPECT_EQ(f.tensors()[2].name, "w");
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  const TensorInfo* s = f.Find("s");
  const TensorInfo* m = f.Find("m");
  const TensorInfo* w = f.Find("w");
  ASSERT_TRUE(s && m && w);
  EXPECT_EQ(f.Find("x"), nullptr);
  EXPECT_EQ(s->dtype, DType::kI16);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numel(), 1);
  EXPECT_EQ(s->offset, 8u + 195u);
  EXPECT_EQ(s->nbytes, 2u);
  int16_t sv;
  std::memcpy(&sv, f.Data(*s).data(), 2);
  EXPECT_EQ(sv, -2);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(std::vector<uint8_t>(f.Data(*m).begin(), f.Data(*m).end()), (std::vector<uint8_t>{7, 9}));
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->offset, 8u + 195u + 4u);
  ASSERT_EQ(f.Data(*w).size(), 8u);
  float wv[2];
  std::memcpy(wv, f.Data(*w).data(), 8);
  EXPECT_EQ(wv[0], 1.0f);
  EXPECT_EQ(wv[1], -2.5f);
}

class SafetensorsTempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "st_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

using SafetensorsReadTest = SafetensorsTempDirTest;

TEST_F(SafetensorsReadTest, HandMadeFileWrittenByteByByte) {
  const std::string path = Path("hand.safetensors");
  FILE* out = fopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  for (uint8_t b : kHandLength) fputc(b, out);
  for (size_t i = 0; i + 1 < sizeof(kHandHeader); ++i) fputc(kHandHeader[i], out);
  for (uint8_t b : kHandData) fputc(b, out);
  ASSERT_EQ(fclose(out), 0);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->path(), path);
  CheckHandMade(**file);
}

TEST(SafetensorsFixtureTest, CommittedFixtureMatchesHandMadeBytes) {
  const std::string path = std::string(DF11_TEST_FIXTURES) + "/safetensors/hand_made.safetensors";
  std::vector<uint8_t> expected = kHandLength;
  expected.insert(expected.end(), kHandHeader, kHandHeader + sizeof(kHandHeader) - 1);
  expected.insert(expected.end(), kHandData.begin(), kHandData.end());
  EXPECT_EQ(ReadAll(path), expected);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  CheckHandMade(**file);
}

TEST(SafetensorsParseTest, ZeroSizedTensorsShareAnOffset) {
  const std::string header =
      R"({"z1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"c":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("z2":{"dtype":"BF16","shape":[3,0,2],"data_offsets":[4,4]},"__metadata__":null})";
  auto file = SafetensorsFile::FromBytes("z.safetensors", MakeFile(header, {1, 2, 3, 4}));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->tensors()[0].name, "z1");
  EXPECT_EQ((*file)->tensors()[1].name, "c");
  EXPECT_EQ((*file)->tensors()[2].name, "z2");
  EXPECT_TRUE((*file)->Data(*(*file)->Find("z2")).empty());
  EXPECT_EQ((*file)->Data(*(*file)->Find("c"))[3], 4);
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST(SafetensorsParseTest, EmptyHeaderAndNoTensors) {
  auto file = SafetensorsFile::FromBytes("e.safetensors", MakeFile("{}      "));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE((*file)->tensors().empty());
}

TEST_F(SafetensorsReadTest, OpenErrors) {
  auto missing = SafetensorsFile::Open(Path("nope.safetensors"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("nope.safetensors"), std::string::npos);

  auto dir = SafetensorsFile::Open(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument) << dir.status().ToString();
  EXPECT_NE(dir.status().message().find("directory"), std::string::npos);

  WriteBytes(Path("empty.safetensors"), {});
  auto empty = SafetensorsFile::Open(Path("empty.safetensors"));
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss) << empty.status().ToString();
  EXPECT_NE(empty.status().message().find("empty.safetensors: file is empty"), std::string::npos);

  WriteBytes(Path("short.safetensors"), {2, 0, 0, 0, 0});
  auto shortf = SafetensorsFile::Open(Path("short.safetensors"));
  EXPECT_EQ(shortf.status().code(), StatusCode::kDataLoss) << shortf.status().ToString();
  EXPECT_NE(shortf.status().message().find("5 bytes"), std::string::npos);

  std::vector<uint8_t> truncated = MakeFile(OneTensor(R"("F32")", "[2]", "[0,8]"), {1, 2, 3});
  WriteBytes(Path("trunc.safetensors"), truncated);
  auto trunc = SafetensorsFile::Open(Path("trunc.safetensors"));
  EXPECT_EQ(trunc.status().code(), StatusCode::kDataLoss) << trunc.status().ToString();
  EXPECT_NE(trunc.status().message().find(Path("trunc.safetensors") + ": tensor 'a'"), std::string::npos);
}

// ---- Bad inputs: each must fail with the right code and a message naming file and tensor. ----

TEST(SafetensorsBadInputTest, ShortBuffers) {
  ExpectError({}, StatusCode::kDataLoss, {"empty"});
  ExpectError({0, 0, 0, 0, 0, 0, 0}, StatusCode::kDataLoss, {"7 bytes"});
}

TEST(SafetensorsBadInputTest, HeaderLengthTooLarge) {
  ExpectError(MakeFile("{}", {}, 100'000'001), StatusCode::kDataLoss, {"100000001", "exceeds"});
  ExpectError(MakeFile("{}", {}, ~uint64_t{0}), StatusCode::kDataLoss, {"18446744073709551615", "exceeds"});
  // Exactly at the limit is allowed by the length check; this file is just too short for it.
  ExpectError(MakeFile("{}", {}, 100'000'000), StatusCode::kDataLoss, {"truncated header", "100000000"});
}

TEST(SafetensorsBadInputTest, TruncatedHeader) {
  const std::string header = OneTensor(R"("U8")", "[1]", "[0,1]");
  ExpectError(MakeFile(header.substr(0, 20), {}, header.size()), StatusCode::kDataLoss,
              {"truncated header", std::to_string(header.size())});
}

TEST(SafetensorsBadInputTest, TruncatedData) {
  ExpectError(MakeFile(OneTensor(R"("F32")", "[2]", "[0,8]"), {1, 2, 3, 4}), StatusCode::kDataLoss,
              {"tensor 'a'", "[0, 8]", "past the end", "4 bytes"});
}

TEST(SafetensorsBadInputTest, HeaderMustStartWithBrace) {
  ExpectError(MakeFile(" {}"), StatusCode::kDataLoss, {"start with '{'"});
  ExpectError(MakeFile("[]"), StatusCode::kDataLoss, {"start with '{'"});
  ExpectError(MakeFile(""), StatusCode::kDataLoss, {"start with '{'"});
}

TEST(SafetensorsBadInputTest, InvalidJsonAndUtf8) {
  ExpectError(MakeFile(R"({"a":)"), StatusCode::kDataLoss, {"not valid JSON"});
  ExpectError(MakeFile("{} x"), StatusCode::kDataLoss, {"not valid JSON"});
  ExpectError(MakeFile("{\"\xff\":1}"), StatusCode::kDataLoss, {"UTF-8", "offset 10"});
  ExpectError(MakeFile("{\"\xed\xa0\x80\":1}"), StatusCode::kDataLoss, {"UTF-8"});  // surrogate
  ExpectError(MakeFile("{\"\xc0\xaf\":1}"), StatusCode::kDataLoss, {"UTF-8"});      // overlong '/'
}

TEST(SafetensorsBadInputTest, DuplicateNames) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  ExpectError(MakeFile(header, {1, 2}), StatusCode::kInvalidArgument, {"duplicate tensor name 'a'"});
  const std::string field = R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})";
  ExpectError(MakeFile(field, {1}), StatusCode::kInvalidArgument, {"duplicate key 'dtype'"});
  ExpectError(MakeFile(R"({"__metadata__":{"k":"1","k":"2"}})"), StatusCode::kInvalidArgument,
              {"duplicate key 'k'"});
}

TEST(SafetensorsBadInputTest, OffsetLayout) {
  const auto two = [](std::string_view a_offsets, std::string_view b_offsets) {
    return R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + std::string(a_offsets) +
           R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" + std::string(b_offsets) + "}}";
  };
  const std::vector<uint8_t> eight(8, 0);
  ASSERT_TRUE(SafetensorsFile::FromBytes("ok", MakeFile(two("[0,4]", "[4,8]"), eight)).ok());
  ExpectError(MakeFile(two("[0,4]", "[2,6]"), eight), StatusCode::kDataLoss,
              {"tensor 'b'", "[2, 6]", "overlap", "'a'"});
  ExpectError(MakeFile(two("[0,4]", "[8,12]"), std::vector<uint8_t>(12)), StatusCode::kDataLoss,
              {"tensor 'b'", "gap of 4 bytes", "'a' ends at 4"});
  ExpectError(MakeFile(two("[4,8]", "[8,12]"), std::vector<uint8_t>(12)), StatusCode::kDataLoss,
              {"tensor 'a'", "gap of 4 bytes"});
  ExpectError(MakeFile(two("[0,4]", "[4,8]"), std::vector<uint8_t>(6)), StatusCode::kDataLoss,
              {"tensor 'b'", "past the end", "6 bytes"});
  const std::string file_size = std::to_string(8 + two("[0,4]", "[4,8]").size() + 11);
  ExpectError(MakeFile(two("[0,4]", "[4,8]"), std::vector<uint8_t>(11)), StatusCode::kDataLoss,
              {"3 trailing bytes", "'b'", "file is " + file_size + " bytes"});
  ExpectError(MakeFile("{}", {0}), StatusCode::kDataLoss, {"1 trailing bytes"});
  ExpectError(MakeFile(two("[4,0]", "[0,4]"), eight), StatusCode::kDataLoss, {"tensor 'a'", "end before"});
}

TEST(SafetensorsBadInputTest, SizeMismatch) {
  ExpectError(MakeFile(OneTensor(R"("F32")", "[3]", "[0,8]"), std::vector<uint8_t>(8)),
              StatusCode::kInvalidArgument, {"tensor 'a'", "hold 8 bytes", "needs 12"});
  ExpectError(MakeFile(OneTensor(R"("BF16")", "[]", "[0,1]"), {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "needs 2"});
}

TEST(SafetensorsBadInputTest, OverflowingShape) {
  ExpectError(MakeFile(OneTensor(R"("U8")", "[4294967296,4294967296]", "[0,0]")),
              StatusCode::kInvalidArgument, {"tensor 'a'", "2^63"});
  // An overflow before a zero dimension is still an overflow (as in the Rust crate).
  ExpectError(MakeFile(OneTensor(R"("U8")", "[4611686018427387904,4,0]", "[0,0]")),
              StatusCode::kInvalidArgument, {"tensor 'a'", "2^63"});
  ExpectError(MakeFile(OneTensor(R"("F64")", "[4611686018427387904]", "[0,0]")),
              StatusCode::kInvalidArgument, {"tensor 'a'", "overflows 64-bit byte size"});
  ExpectError(MakeFile(OneTensor(R"("U8")", "[18446744073709551615]", "[0,0]")),
              StatusCode::kInvalidArgument, {"tensor 'a'", "overflows int64"});
  ExpectError(MakeFile(OneTensor(R"("U8")", "[1e30]", "[0,0]")), StatusCode::kInvalidArgument,
              {"tensor 'a'", "non-negative integer"});
}

TEST(SafetensorsBadInputTest, BadFieldValues) {
  ExpectError(MakeFile(OneTensor(R"("U8")", "[-1]", "[0,0]")), StatusCode::kInvalidArgument,
              {"tensor 'a'", "negative shape dimension -1"});
  ExpectError(MakeFile(OneTensor(R"("F4")", "[1]", "[0,1]"), {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "unknown dtype 'F4'"});
  ExpectError(MakeFile(OneTensor("7", "[1]", "[0,1]"), {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "dtype must be a string"});
  ExpectError(MakeFile(OneTensor(R"("U8")", R"("1")", "[0,1]"), {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "shape must be an array"});
  ExpectError(MakeFile(OneTensor(R"("U8")", "[true]", "[0,1]"), {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "non-negative integer"});
  for (const char* offsets : {"[0]", "[0,1,1]", "[-1,1]", "[0,1.5]", R"({"b":0})"}) {
    SCOPED_TRACE(offsets);
    ExpectError(MakeFile(OneTensor(R"("U8")", "[1]", offsets), {0}), StatusCode::kInvalidArgument,
                {"tensor 'a'", "data_offsets must be two"});
  }
  ExpectError(MakeFile(R"({"a":[1]})"), StatusCode::kInvalidArgument, {"tensor 'a'", "must be an object"});
  ExpectError(MakeFile(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", {0}),
              StatusCode::kInvalidArgument, {"tensor 'a'", "unknown field 'x'"});
  ExpectError(MakeFile(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", {0}), StatusCode::kInvalidArgument,
              {"tensor 'a'", "missing field 'shape'"});
}

TEST(SafetensorsBadInputTest, BadMetadata) {
  ExpectError(MakeFile(R"({"__metadata__":{"k":1}})"), StatusCode::kInvalidArgument,
              {"__metadata__ key 'k'", "string"});
  ExpectError(MakeFile(R"({"__metadata__":["k"]})"), StatusCode::kInvalidArgument, {"__metadata__"});
  ExpectError(MakeFile(R"({"__metadata__":{"k":{"n":"1"}}})"), StatusCode::kInvalidArgument, {"'k'"});
}

TEST(SafetensorsBadInputTest, DeepNestingIsRejectedNotRecursed) {
  ExpectError(MakeFile(R"({"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", {0}),
              StatusCode::kInvalidArgument, {"nested deeper"});
  const std::string deep = R"({"a":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
  ExpectError(MakeFile(deep), StatusCode::kInvalidArgument, {"nested deeper"});
}

// ---- Writer ----

using SafetensorsWriterTest = SafetensorsTempDirTest;

std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed * 7 + 1);
  return v;
}

TEST_F(SafetensorsWriterTest, RoundTripAllDTypesAndShapes) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 1, 1, 5}};
  struct Expected {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::map<std::string, Expected> expected;
  SafetensorsWriter writer;
  int seed = 0;
  for (DType dtype : kAllDTypes) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      TensorInfo probe;
      probe.shape = shapes[s];
      const std::string name = std::string("t.") + DTypeName(dtype) + "." + std::to_string(s);
      auto data = Pattern(probe.numel() * DTypeSize(dtype), seed++);
      expected[name] = {dtype, shapes[s], data};
      if (s % 2) writer.Add(name, dtype, shapes[s], data);
      else writer.AddView(name, dtype, shapes[s], expected[name].data);
    }
  }
  writer.SetMetadata("format", "pt");
  writer.SetMetadata("ünïcode", "välue");
  const std::string path = Path("rt.safetensors");
  ASSERT_TRUE(writer.Write(path).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"ünïcode", "välue"}}));
  ASSERT_EQ((*file)->tensors().size(), expected.size());
  auto it = expected.begin();
  for (const TensorInfo& t : (*file)->tensors()) {  // data order == name order
    EXPECT_EQ(t.name, it->first);
    EXPECT_EQ(t.dtype, it->second.dtype) << t.name;
    EXPECT_EQ(t.shape, it->second.shape) << t.name;
    auto bytes = (*file)->Data(t);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), it->second.data) << t.name;
    ++it;
  }

  // Header layout: length % 8 == 0, space padded, "__metadata__" first, then names in order.
  const std::vector<uint8_t> raw = ReadAll(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  EXPECT_EQ(n % 8, 0u);
  const std::string header(raw.begin() + 8, raw.begin() + 8 + n);
  const auto ordered = nlohmann::ordered_json::parse(header);
  auto key = ordered.items().begin();
  EXPECT_EQ(key.key(), "__metadata__");
  for (const auto& [name, e] : expected) EXPECT_EQ((++key).key(), name);
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
}

TEST_F(SafetensorsWriterTest, ExactBytes) {
  SafetensorsWriter writer;
  writer.Add("x", DType::kU8, {2}, {0xAB, 0xCD});
  const std::string path = Path("x.safetensors");
  ASSERT_TRUE(writer.Write(path).ok());
  const std::string json = R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";  // 53 bytes
  std::vector<uint8_t> expected = {56, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), json.begin(), json.end());
  expected.insert(expected.end(), 3, ' ');
  expected.push_back(0xAB);
  expected.push_back(0xCD);
  EXPECT_EQ(ReadAll(path), expected);

  ASSERT_TRUE(SafetensorsWriter().Write(path).ok());  // overwrites; no tensors
  EXPECT_EQ(ReadAll(path), MakeFile("{}      "));
}

TEST_F(SafetensorsWriterTest, LargeTensorStreamsInChunks) {
  std::vector<uint8_t> big = Pattern((size_t{65} << 20) + 3, 5);  // crosses the 64 MiB write chunk
  SafetensorsWriter writer;
  writer.AddView("big", DType::kU8, {static_cast<int64_t>(big.size())}, big);
  writer.Add("small", DType::kI32, {1}, {1, 2, 3, 4});
  const std::string path = Path("big.safetensors");
  ASSERT_TRUE(writer.Write(path).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto data = (*file)->Data(*(*file)->Find("big"));
  ASSERT_EQ(data.size(), big.size());
  EXPECT_EQ(std::memcmp(data.data(), big.data(), big.size()), 0);
  EXPECT_EQ((*file)->Data(*(*file)->Find("small"))[3], 4);
}

TEST_F(SafetensorsWriterTest, RejectsBadTensorsAndLeavesNoFile) {
  const std::string path = Path("bad.safetensors");
  const auto expect_fail = [&](const SafetensorsWriter& w, StatusCode code, const std::string& needle) {
    Status s = w.Write(path);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + ".tmp"));
  };
  SafetensorsWriter dup;
  dup.Add("w", DType::kU8, {1}, {1});
  dup.Add("w", DType::kU8, {1}, {2});
  expect_fail(dup, StatusCode::kInvalidArgument, "tensor 'w': duplicate");
  SafetensorsWriter size;
  size.Add("w", DType::kF32, {2}, {1, 2, 3});
  expect_fail(size, StatusCode::kInvalidArgument, "tensor 'w': has 3 bytes");
  SafetensorsWriter neg;
  neg.Add("w", DType::kF32, {-2}, {});
  expect_fail(neg, StatusCode::kInvalidArgument, "negative dimension -2");
  SafetensorsWriter over;
  over.Add("w", DType::kF32, {int64_t{1} << 62, 2}, {});
  expect_fail(over, StatusCode::kInvalidArgument, "overflows");
  SafetensorsWriter reserved;
  reserved.Add("__metadata__", DType::kU8, {0}, {});
  expect_fail(reserved, StatusCode::kInvalidArgument, "reserved");
  SafetensorsWriter utf8;
  utf8.Add("bad\xff", DType::kU8, {0}, {});
  expect_fail(utf8, StatusCode::kInvalidArgument, "UTF-8");

  SafetensorsWriter ok;
  ok.Add("w", DType::kU8, {1}, {1});
  Status s = ok.Write(Path("no/such/dir/x.safetensors"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir/x.safetensors.tmp"), std::string::npos) << s.ToString();
}

// ---- TensorStore ----

class TensorStoreTest : public SafetensorsTempDirTest {
 protected:
  // Writes `names` (U8 [1] each, value = first char) into `file` inside the temp dir.
  void WriteFile(const std::string& file, const std::vector<std::string>& names) {
    SafetensorsWriter w;
    for (const std::string& n : names) w.Add(n, DType::kU8, {1}, {static_cast<uint8_t>(n[0])});
    ASSERT_TRUE(w.Write(Path(file)).ok());
  }
  void WriteIndex(const std::string& text) {
    std::ofstream(Path("model.safetensors.index.json")) << text;
  }
  Status OpenStatus() { return TensorStore::Open(dir_).status(); }
};

TEST_F(TensorStoreTest, TwoFilesOneNamespace) {
  WriteFile("b.safetensors", {"z"});
  WriteFile("a.safetensors", {"x", "y"});
  WriteFile("notes.txt", {"n"});
  WriteFile("c.safetensors.tmp", {"t"});
  fs::create_directory(Path("sub"));
  WriteFile("sub/d.safetensors", {"d"});
  auto store = TensorStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(store->Names(), (std::vector<std::string>{"x", "y", "z"}));
  ASSERT_EQ(store->files().size(), 2u);
  EXPECT_EQ(store->files()[0]->path(), Path("a.safetensors"));  // sorted by file name
  EXPECT_EQ(store->files()[1]->path(), Path("b.safetensors"));
  const TensorStore::Entry z = store->Find("z");
  ASSERT_NE(z.file, nullptr);
  EXPECT_EQ(z.file, store->files()[1].get());
  EXPECT_EQ(z.info->name, "z");
  ASSERT_EQ(store->Data(z).size(), 1u);
  EXPECT_EQ(store->Data(z)[0], 'z');
  EXPECT_EQ(store->Find("d").file, nullptr);
  EXPECT_EQ(store->Find("missing").file, nullptr);
  EXPECT_EQ(store->Find("missing").info, nullptr);

  TensorStore moved = std::move(*store);  // entries point into heap-owned files
  EXPECT_EQ(moved.Data(moved.Find("y"))[0], 'y');
}

TEST_F(TensorStoreTest, SingleFilePath) {
  WriteFile("a.safetensors", {"x"});
  WriteFile("b.safetensors", {"x"});  // would clash if the directory were opened
  auto store = TensorStore::Open(Path("b.safetensors"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(store->Names(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(store->Find("x").file->path(), Path("b.safetensors"));
}

TEST_F(TensorStoreTest, DuplicateAcrossFilesNamesBoth) {
  WriteFile("a.safetensors", {"x", "shared"});
  WriteFile("b.safetensors", {"shared"});
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const std::string& needle : {std::string("'shared'"), Path("a.safetensors"), Path("b.safetensors")}) {
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  }
}

TEST_F(TensorStoreTest, MissingEmptyAndCorrupt) {
  EXPECT_EQ(TensorStore::Open(Path("nothing")).status().code(), StatusCode::kNotFound);
  Status empty = OpenStatus();
  EXPECT_EQ(empty.code(), StatusCode::kNotFound) << empty.ToString();
  EXPECT_NE(empty.message().find("no *.safetensors"), std::string::npos);
  WriteFile("a.safetensors", {"x"});
  WriteBytes(Path("b.safetensors"), MakeFile("{]"));
  Status corrupt = OpenStatus();
  EXPECT_EQ(corrupt.code(), StatusCode::kDataLoss) << corrupt.ToString();
  EXPECT_NE(corrupt.message().find(Path("b.safetensors")), std::string::npos);
}

TEST_F(TensorStoreTest, IndexMatchingFilesIsAccepted) {
  WriteFile("model-1.safetensors", {"x", "y"});
  WriteFile("model-2.safetensors", {"z"});
  WriteIndex(R"({"metadata":{"total_size":3},"weight_map":{"x":"model-1.safetensors","y":"model-1.safetensors",)"
             R"("z":"model-2.safetensors"}})");
  auto store = TensorStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(store->Names().size(), 3u);
}

TEST_F(TensorStoreTest, IndexMismatches) {
  WriteFile("model-1.safetensors", {"x", "y"});
  WriteFile("model-2.safetensors", {"z"});
  const std::string index = Path("model.safetensors.index.json");
  const auto expect = [&](const std::string& text, StatusCode code, const std::vector<std::string>& needles) {
    WriteIndex(text);
    Status s = OpenStatus();
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(index), std::string::npos) << s.ToString();
    for (const std::string& n : needles) EXPECT_NE(s.message().find(n), std::string::npos) << s.ToString();
  };
  expect(R"({"weight_map":{"z":"model-1.safetensors"}})", StatusCode::kDataLoss,
         {"'z'", Path("model-1.safetensors"), Path("model-2.safetensors")});
  expect(R"({"weight_map":{"x":"model-3.safetensors"}})", StatusCode::kNotFound, {"'x'", "'model-3.safetensors'"});
  expect(R"({"weight_map":{"w":"model-1.safetensors"}})", StatusCode::kNotFound, {"'w'"});
  expect(R"({"weight_map":{"x":"model-1.safetensors",)", StatusCode::kDataLoss, {"malformed"});
  expect(R"({"metadata":{}})", StatusCode::kInvalidArgument, {"weight_map"});
  expect(R"({"weight_map":{"x":1}})", StatusCode::kInvalidArgument, {"'x'"});
  expect(R"([])", StatusCode::kInvalidArgument, {"weight_map"});
}

}  // namespace
}  // namespace df11
