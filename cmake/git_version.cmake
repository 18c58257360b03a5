# Run at every build (cmake -P): writes OUT, a header defining IMPTRACE_GIT_DESCRIPTION as
# "git <commit>[-dirty]" for a build from a git checkout, else FALLBACK (set with
# -DIMPTRACE_GIT_COMMIT=... for a build from a source archive), else "not built from git".
# The file is rewritten only when the text changes, so an unchanged commit rebuilds nothing.
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE commit RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc EQUAL 0 AND commit)
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE dirty ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(desc "git ${commit}")
  if(dirty)
    string(APPEND desc "-dirty")
  endif()
elseif(FALLBACK)
  set(desc "git ${FALLBACK}")
else()
  set(desc "not built from git")
endif()
file(WRITE "${OUT}.tmp" "#define IMPTRACE_GIT_DESCRIPTION \"${desc}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
