# Cross-compiling the tracer for AArch64 (the platform of the seed failure) with Debian's
# g++-aarch64-linux-gnu; scripts/aarch64.sh builds with it and runs the result under
# qemu-aarch64-static.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# Build steps that run a built program (the viewer's man pages) run it under qemu with the
# cross toolchain's libraries.
find_program(IMPTRACE_QEMU_AARCH64 qemu-aarch64-static)
if(IMPTRACE_QEMU_AARCH64 AND EXISTS /usr/aarch64-linux-gnu/lib)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${IMPTRACE_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
