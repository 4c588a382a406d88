// Filter implementations shared between filters.cc (registry, scalar/string filters) and
// filters_seq.cc (sequence filters). Internal to runtime/template/jinja.
#pragma once

#include "runtime/template/jinja/interp.h"

namespace df11::jinja {

using FilterFn = StatusOr<Value> (*)(Interpreter&, const Value& input, CallArgs&);

StatusOr<Value> DictSortFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> FirstFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> FormatFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> ItemsFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> JoinFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> LastFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> ListFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> MapFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> MaxFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> MinFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> RejectFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> RejectAttrFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> ReverseFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> SelectFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> SelectAttrFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> SortFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> SumFilter(Interpreter&, const Value&, CallArgs&);
StatusOr<Value> UniqueFilter(Interpreter&, const Value&, CallArgs&);

}  // namespace df11::jinja
