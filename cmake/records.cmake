# records.h (the trace format's numbers for the hand-written encoder and decoder) is
# generated from proto/imptrace.proto at build time: protoc parses the .proto into a
# descriptor set and proto/gen_records.py writes the constants, so they cannot drift from
# the .proto. Defines IMPTRACE_RECORDS_DIR (put it on the include path) and the target
# imptrace_records (make every target that includes records.h depend on it).
# Runs on the build host, also when the targets are cross-compiled.
find_program(IMPTRACE_PROTOC protoc REQUIRED)
find_package(Python3 COMPONENTS Interpreter REQUIRED)

function(imptrace_generate_records proto_dir)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/generated)
  file(MAKE_DIRECTORY ${dir})
  add_custom_command(
    OUTPUT ${dir}/records.h
    COMMAND ${IMPTRACE_PROTOC} --descriptor_set_out=${dir}/imptrace.desc -I ${proto_dir} ${proto_dir}/imptrace.proto
    COMMAND ${Python3_EXECUTABLE} ${proto_dir}/gen_records.py ${dir}/imptrace.desc ${dir}/records.h
    DEPENDS ${proto_dir}/imptrace.proto ${proto_dir}/gen_records.py
    COMMENT "Generating records.h from imptrace.proto"
    VERBATIM)
  add_custom_target(imptrace_records DEPENDS ${dir}/records.h)
  set(IMPTRACE_RECORDS_DIR ${dir} PARENT_SCOPE)
endfunction()
