# One INTERFACE target carrying the project's warning flags and feature macros,
# linked by every gpuledger library and executable.
add_library(gpl_options INTERFACE)
target_compile_options(gpl_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
# CI builds with GPULEDGER_WERROR=ON so that a new warning fails the build; it
# stays off by default so that a newer compiler's new warnings do not stop a
# user's build. For CUDA only the host compiler's warnings are made errors.
if(GPULEDGER_WERROR)
  target_compile_options(gpl_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
endif()
# CI's second build: every library, test and the binary under ASan and UBSan,
# an undefined-behaviour report fatal (-fno-sanitize-recover) so that a test
# or a bad-input case that triggers one fails.
#
# It is compiled at -Og, not the build type's level: instrumented, the
# command-line files are slow to compile at -O3 (bench/cli/plan.cpp: 45 s of
# CPU at -O3, 21 s at -O1, 13 s at -Og with GCC 12). The CPU kernels alone keep
# -O2 (kernels/CMakeLists.txt) so that the tests' GEMMs still run at speed.
if(GPULEDGER_SANITIZE)
  set(gpl_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_compile_options(gpl_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${gpl_sanitize_flags} -Og>)
  target_link_options(gpl_options INTERFACE ${gpl_sanitize_flags})
  # GCC's -Wmaybe-uninitialized reports false positives inside libstdc++
  # (std::function in <regex>) once ASan instruments it; with -Werror they would
  # stop the build. The sanitizers themselves catch real uninitialised reads.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(gpl_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endif()
if(GPULEDGER_FUZZ)
  target_compile_options(gpl_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined>)
  target_link_options(gpl_options INTERFACE -fsanitize=address,undefined)
endif()
target_include_directories(gpl_options INTERFACE ${PROJECT_SOURCE_DIR})
target_compile_definitions(gpl_options INTERFACE
  GPULEDGER_VERSION="${PROJECT_VERSION}"
  GPULEDGER_HAVE_CUDA=$<BOOL:${GPULEDGER_HAVE_CUDA}>
  GPULEDGER_HAVE_MPI=$<BOOL:${GPULEDGER_HAVE_MPI}>
  GPULEDGER_HAVE_BLAS=$<BOOL:${GPULEDGER_HAVE_BLAS}>)
