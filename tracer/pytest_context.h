// The pytest test running now, for the records' `test` field.
#pragma once

#include <stdint.h>

namespace imptrace {

// The string id of the node id in PYTEST_CURRENT_TEST ("<node id> (setup|call|teardown)"),
// 0 when it is not set.
uint32_t current_test();

// What changes with PYTEST_CURRENT_TEST (its environment entry; 0 when unset), for a check
// that must not take the writer lock or intern anything: pytest sets the variable again at
// every phase of every test.
uintptr_t current_test_token();

}  // namespace imptrace
