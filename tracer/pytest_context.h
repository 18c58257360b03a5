// The pytest test running now, for the records' `test` field.
#pragma once

#include <stdint.h>

namespace imptrace {

// The string id of the node id in PYTEST_CURRENT_TEST ("<node id> (setup|call|teardown)"),
// 0 when it is not set.
uint32_t current_test();

}  // namespace imptrace
