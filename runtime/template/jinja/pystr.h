// Python `str` semantics over UTF-8 byte strings, as the Jinja evaluator needs them: code-point
// indexing and slicing, str.isspace/strip/split/splitlines, case mapping, repr() quoting and
// float repr(). All functions take and return valid UTF-8 (callers validate input once).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/utf8.h"

namespace df11::jinja::pystr {

// Decodes valid UTF-8 into code points / encodes code points back (validation, AppendUtf8 and
// Python len() are kernels/base/utf8.h).
std::u32string Decode(std::string_view s);
std::string Encode(std::u32string_view s);

bool IsAscii(std::string_view s);

// Python str.isspace() for one code point (Unicode White_Space + \x1c-\x1f).
bool IsSpace(char32_t c);
// Python str.splitlines() line boundaries.
bool IsLineBreak(char32_t c);

// str.strip/lstrip/rstrip; `chars` = nullopt strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) / str.rsplit; sep = nullopt splits on whitespace runs.
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right);
// str.splitlines(keepends).
std::vector<std::string> SplitLines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all. Returns false (output incomplete)
// as soon as the result would exceed max_bytes.
bool Replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count, size_t max_bytes,
             std::string* out);
// str.find: code-point index of the first occurrence at/after code point `start`, or -1.
int64_t Find(std::string_view s, std::string_view sub, bool reverse);
// str.count (non-overlapping).
int64_t Count(std::string_view s, std::string_view sub);

// Case mapping of str.upper()/lower() (full mapping for ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic; other code points map to themselves). `ok` is cleared when the input
// contains a cased code point outside those ranges, so callers can refuse rather than guess.
std::string Upper(std::string_view s, bool* ok);
std::string Lower(std::string_view s, bool* ok);
// str.title(), str.capitalize(), str.swapcase().
std::string Title(std::string_view s, bool* ok);
std::string Capitalize(std::string_view s, bool* ok);
// Jinja's `title` filter: words begin after [-\s({\[<]; first char upper, rest lower.
std::string JinjaTitle(std::string_view s, bool* ok);
bool IsUpperChar(char32_t c);
bool IsLowerChar(char32_t c);
// Python str.isupper() (upper) or str.islower(): a cased character and none of the other case.
bool IsAllCase(std::string_view s, bool upper);

// Python repr() of a str: quote choice and escapes exactly as CPython.
void AppendRepr(std::string_view s, std::string* out);
// Python repr() of a float ("1.0", "1e-05", "1.2345678901234568e+17", "inf", "nan").
std::string FloatRepr(double v);

// Code-point slice s[start:stop:step] with Python semantics (nullopt = omitted bound).
// Returns false if step == 0.
bool SliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step, std::vector<int64_t>* indices);
// The adjusted [begin, end, step) of that slice (CPython PySlice_AdjustIndices).
bool AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                 std::optional<int64_t> step, int64_t* begin, int64_t* end, int64_t* stride);

// HTML escaping as markupsafe.escape: & < > " ' .
std::string HtmlEscape(std::string_view s);

}  // namespace df11::jinja::pystr
