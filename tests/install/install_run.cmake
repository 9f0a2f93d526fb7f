# cmake -DBUILD_DIR=... -DBINDIR=bin -P install_run.cmake (see CMakeLists.txt here).
cmake_minimum_required(VERSION 3.24)

if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp /tmp)
endif()
string(RANDOM LENGTH 8 suffix)
# Outside the build tree: a binary there cannot reach the build's copy of the
# presets by walking up, so what it finds is what was installed.
set(root "${tmp}/gpuledger-install-test-${suffix}")
set(prefix "${root}/prefix")
set(elsewhere "${root}/elsewhere")
file(MAKE_DIRECTORY "${elsewhere}")
unset(ENV{GPULEDGER_PRESETS})

function(fail msg)
  file(REMOVE_RECURSE "${root}")
  message(FATAL_ERROR "${msg}")
endfunction()

# run(OUT_VAR EXPECTED_RC ARGS...): the installed binary, from ${elsewhere}.
function(run out_var expected_rc)
  execute_process(COMMAND "${prefix}/${BINDIR}/gpuledger" ${ARGN}
                  WORKING_DIRECTORY "${elsewhere}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " args "${ARGN}")
  if(NOT rc STREQUAL expected_rc)
    fail("gpuledger ${args}: exit ${rc}, expected ${expected_rc}\n${out}\n${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("cmake --install failed (${rc}):\n${out}\n${err}")
endif()
foreach(f "${BINDIR}/gpuledger" share/gpuledger/presets/llama3-8b.json share/gpuledger/presets/gpt2.json)
  if(NOT EXISTS "${prefix}/${f}")
    fail("not installed: ${prefix}/${f}")
  endif()
endforeach()

run(out 0 models)
foreach(name gpt2 llama3-8b llama3-70b)
  if(NOT out MATCHES "\n +${name} ")
    fail("gpuledger models does not list ${name}:\n${out}")
  endif()
endforeach()

run(out 0 plan --model llama3-8b)
if(NOT out MATCHES "# model +llama3-8b")
  fail("gpuledger plan --model llama3-8b printed no model line:\n${out}")
endif()

# Without the installed presets the binary must say where it looked.
file(REMOVE_RECURSE "${prefix}/share/gpuledger/presets")
run(out 2 plan --model llama3-8b)
string(FIND "${out}" "${prefix}/share/gpuledger/presets" at)
if(NOT out MATCHES "presets not found" OR at EQUAL -1)
  fail("with no presets installed, the error does not name ${prefix}/share/gpuledger/presets:\n${out}")
endif()

file(REMOVE_RECURSE "${root}")
message(STATUS "installed to ${prefix}: gpuledger models and plan found the installed presets")
