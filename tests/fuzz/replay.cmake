# Runs FUZZER over every file in DIR (libFuzzer runs each input once and exits non-zero on a
# crash). A missing or empty DIR passes.
file(GLOB inputs "${DIR}/*")
if(NOT inputs)
  return()
endif()
execute_process(COMMAND ${FUZZER} -runs=1 ${inputs} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed on an input in ${DIR} (exit ${rc})")
endif()
