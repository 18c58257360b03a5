// A small trace shaped like the npugraph_ex smoke failure, shared by the unit tests:
// npugraph_ex is imported (module 0x200), then torch_npu's add_dynamo_methods() puts a
// _LazyNpuGraphEx proxy (0x400) under sys.modules['npugraph_ex']; the child
// npu_fx_compiler is later bound on that proxy, and the test's setUp reads it through the
// proxy, which forwards to torch_npu.dynamo.npugraph_ex and fails with AttributeError.
#pragma once

#include "trace_builder.h"

namespace imptrace {
namespace testing {

constexpr const char* kSite = "/x/site-packages";
constexpr const char* kTestId = "test_smoke.py::SmokeTest::test_compile (call)";

inline void build_npugraph_scenario(TraceBuilder& b) {
  b.add_sys_path({"/work/app", kSite, ""}, 10);
  Loc test_import{"/work/app/test_smoke.py", 3, "<module>"};

  auto torch_npu = ImportSpec::make(0, "torch_npu", 1000, 9000);
  torch_npu.object = Obj::module(0x100, "torch_npu", "/x/site-packages/torch_npu/__init__.py");
  torch_npu.origin = "/x/site-packages/torch_npu/__init__.py";
  torch_npu.loader = "_frozen_importlib_external.SourceFileLoader";
  torch_npu.search_locations = {"/x/site-packages/torch_npu"};
  torch_npu.importer = test_import;

  auto dynamo = ImportSpec::make(1, "torch_npu.dynamo", 2000, 3000, /*parent=*/1);
  dynamo.object = Obj::module(0x110, "torch_npu.dynamo", "/x/site-packages/torch_npu/dynamo/__init__.py");
  dynamo.origin = "/x/site-packages/torch_npu/dynamo/__init__.py";
  dynamo.importer = Loc{"/x/site-packages/torch_npu/__init__.py", 7, "<module>"};

  auto npugraph = ImportSpec::make(2, "npugraph_ex", 2500, 1000, /*parent=*/2);
  npugraph.object = Obj::module(0x200, "npugraph_ex", "/x/site-packages/npugraph_ex/__init__.py");
  npugraph.origin = "/x/site-packages/npugraph_ex/__init__.py";
  npugraph.loader = "_frozen_importlib_external.SourceFileLoader";
  npugraph.importer = Loc{"/x/site-packages/torch_npu/dynamo/__init__.py", 12, "<module>"};

  auto missing = ImportSpec::make(3, "torch_npu._missing", 6000, 100, /*parent=*/1);
  missing.ok = false;
  missing.error_type = "ModuleNotFoundError";
  missing.error_message = "No module named 'torch_npu._missing'";
  missing.importer = Loc{"/x/site-packages/torch_npu/__init__.py", 20, "<module>"};

  // Records are written when imports end, so children come before their parents.
  ChangeSpec set_by_import;
  set_by_import.key = "npugraph_ex";
  set_by_import.new_object = npugraph.object;
  set_by_import.by_import_system = true;
  set_by_import.time_ns = 2600;
  set_by_import.during_import = 3;
  set_by_import.stack = {*npugraph.importer};
  b.add_modules_change(set_by_import);
  b.add_import(npugraph);
  b.add_import(dynamo);
  b.add_import(missing);

  ChangeSpec replace;
  replace.key = "npugraph_ex";
  replace.old_object = npugraph.object;
  replace.new_object = Obj::proxy(0x400, "torch_npu.dynamo._LazyNpuGraphEx");
  replace.time_ns = 8000;
  replace.during_import = 1;
  replace.stack = {Loc{"/x/site-packages/torch_npu/utils/_dynamo.py", 42, "add_dynamo_methods"},
                   Loc{"/x/site-packages/torch_npu/__init__.py", 30, "<module>"}};
  b.add_modules_change(replace);
  b.add_proxy_class("torch_npu.dynamo._LazyNpuGraphEx",
                    Loc{"/x/site-packages/torch_npu/dynamo/__init__.py", 50, "_LazyNpuGraphEx.__getattr__"},
                    "torch_npu.dynamo");
  b.add_import(torch_npu);

  auto compiler = ImportSpec::make(4, "npugraph_ex.npu_fx_compiler", 12000, 500);
  compiler.object = Obj::module(0x300, "npugraph_ex.npu_fx_compiler",
                                "/x/site-packages/npugraph_ex/npu_fx_compiler.py");
  compiler.origin = "/x/site-packages/npugraph_ex/npu_fx_compiler.py";
  compiler.importer = Loc{"/work/app/test_smoke.py", 8, "setUpClass"};
  compiler.test = kTestId;
  b.add_import(compiler);

  BindingSpec bind;
  bind.import_index = 4;
  bind.parent = "npugraph_ex";
  bind.attribute = "npu_fx_compiler";
  bind.bound_on = Obj::proxy(0x400, "torch_npu.dynamo._LazyNpuGraphEx");
  bind.child = compiler.object;
  bind.status = F::Binding::ON_PROXY;
  bind.time_ns = 12600;
  bind.test = kTestId;
  b.add_binding(bind);

  AccessSpec access;
  access.proxy = Obj::proxy(0x400, "torch_npu.dynamo._LazyNpuGraphEx");
  access.attribute = "npu_fx_compiler";
  access.ok = false;
  access.error_type = "AttributeError";
  access.error_message = "module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'";
  access.forwarded_to = Obj::module(0x500, "torch_npu.dynamo.npugraph_ex",
                                    "/x/site-packages/torch_npu/dynamo/npugraph_ex/__init__.py");
  access.stack = {Loc{"/work/app/test_smoke.py", 12, "SmokeTest.setUp"}};
  access.time_ns = 13000;
  access.test = kTestId;
  b.add_proxy_access(access);
  b.add_note("dict watcher unavailable on this version; sys.modules changes seen at import boundaries");
}

}  // namespace testing
}  // namespace imptrace
