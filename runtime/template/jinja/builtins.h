// Jinja builtins: filters (filters.cc), tests and globals (tests.cc), and attribute/item access
// with Python methods of str/dict/list (attrs.cc), following jinja2's
// ImmutableSandboxedEnvironment: mutating methods are unavailable and `_`-prefixed attributes
// are hidden; transformers' additions (`tojson` with ensure_ascii=False, `raise_exception`,
// `strftime_now`) replace or extend the jinja2 defaults.
#pragma once

#include <string>
#include <string_view>

#include "runtime/template/jinja/interp.h"

namespace df11::jinja {

// Filters/tests implemented here, and the full jinja2 builtin name lists (for telling
// "not supported" apart from "no such filter").
bool HasFilter(std::string_view name);
bool IsJinjaFilter(std::string_view name);
bool HasTest(std::string_view name);
bool IsJinjaTest(std::string_view name);

StatusOr<Value> CallFilter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);
StatusOr<bool> CallTest(Interpreter& in, const std::string& name, const Value& input, CallArgs& args);

// obj.name: Python attribute first (methods), then item; missing -> undefined;
// attribute of undefined -> UndefinedError.
StatusOr<Value> GetAttr(Interpreter& in, const Value& obj, const std::string& name);
// Python getattr(obj, name) only, without the item fallback (the `attr` filter).
StatusOr<Value> GetAttrOnly(const Value& obj, const std::string& name);
// obj[key]: item first, then attribute for string keys; missing -> undefined.
StatusOr<Value> GetItem(Interpreter& in, const Value& obj, const Value& key);

// Global functions: range, dict, namespace, joiner, raise_exception, strftime_now.
const Value* FindGlobal(const std::string& name);

// Shared helpers for filters/methods.
// str(v) for filters that coerce their input (jinja2 soft_str); undefined -> "".
StatusOr<std::string> SoftStr(const Value& v);
Status UndefinedErrorFor(const Value& v);

}  // namespace df11::jinja
