// The whole vocabulary of a trace file: field numbers of proto/imptrace.proto, for the
// hand-written encoder (tracer) and decoder (viewer). tests/unit checks these numbers
// against the .proto with protoc, so the two cannot drift apart silently.
#pragma once

#include <stdint.h>

namespace imptrace {
namespace fields {

constexpr uint32_t kSchemaMajor = 1;
constexpr uint32_t kSchemaMinor = 1;  // 1: StringDef.prefix

namespace Trace { constexpr uint32_t record = 1, unwritten = 15; }

namespace Record {
constexpr uint32_t header = 1, string_def = 2, import = 3, modules_change = 4, binding = 5,
                   proxy_access = 6, sys_path = 7, proxy_class = 8, note = 9, env_update = 10;
}
namespace EnvVar { constexpr uint32_t name = 1, value = 2; }
namespace Header {
constexpr uint32_t schema_major = 1, schema_minor = 2, tracer_version = 3, pid = 4, ppid = 5,
                   argv = 6, executable = 7, python_version = 8, python_build = 9,
                   platform = 10, machine = 11, cwd = 12, start_time_unix_ns = 13, env = 14,
                   forked_from_pid = 15, start_monotonic_ns = 16;
}
namespace StringDef { constexpr uint32_t id = 1, value = 2, prefix = 3; }
namespace Location { constexpr uint32_t file = 1, line = 2, function = 3; }
namespace ObjectRef { constexpr uint32_t id = 1, type = 2, flags = 3, name = 4, file = 5; }
namespace ObjectFlags {
constexpr uint32_t plain_module = 1, module_subclass = 2, proxy = 4, elided_name_file = 8;
}
namespace Import {
constexpr uint32_t index = 1, parent = 2, thread = 3, begin_ns = 4, duration_ns = 5, name = 6,
                   ok = 7, error_type = 8, error_message = 9, object = 10, spec_name = 11,
                   origin = 12, loader = 13, search_locations = 14, file = 15, importer = 16,
                   test = 17, interpreter = 18, native_stack = 19;
}
namespace NativeFrame { constexpr uint32_t object = 1, offset = 2, symbol = 3; }
namespace ModulesChange {
constexpr uint32_t key = 1, op = 2, old_ = 3, new_ = 4, stack = 5, time_ns = 6, thread = 7,
                   test = 8, precision = 9, during_import = 10, by_import_system = 11;
enum Op : uint32_t { SET = 0, DELETE = 1, CLEAR = 2 };
enum Precision : uint32_t { EXACT = 0, AT_BOUNDARY = 1 };
}
namespace Binding {
constexpr uint32_t import_index = 1, parent = 2, attribute = 3, bound_on = 4, child = 5,
                   status = 6, time_ns = 7, test = 8, attribute_value = 9;
enum Status : uint32_t { BOUND = 0, MISSING = 1, MISMATCH = 2, ON_PROXY = 3 };
}
namespace ProxyAccess {
constexpr uint32_t proxy = 1, attribute = 2, kind = 3, ok = 4, result = 5, error_type = 6,
                   error_message = 7, forwarded_to = 8, stack = 9, time_ns = 10, thread = 11,
                   test = 12, during_import = 13, from_import_system = 14;
enum Kind : uint32_t { GETATTR = 0, SETATTR = 1, MODULE_GETATTR = 2 };
}
namespace ProxyClass {
constexpr uint32_t type = 1, getattr_at = 2, getattribute_at = 3, setattr_at = 4,
                   module_subclass = 5, defined_in = 6;
}
namespace SysPath { constexpr uint32_t entries = 1, time_ns = 2; }
namespace Note { constexpr uint32_t text = 1, time_ns = 2; }

}  // namespace fields
}  // namespace imptrace
