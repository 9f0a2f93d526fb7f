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
target_include_directories(gpl_options INTERFACE ${PROJECT_SOURCE_DIR})
target_compile_definitions(gpl_options INTERFACE
  GPULEDGER_VERSION="${PROJECT_VERSION}"
  GPULEDGER_HAVE_CUDA=$<BOOL:${GPULEDGER_HAVE_CUDA}>
  GPULEDGER_HAVE_MPI=$<BOOL:${GPULEDGER_HAVE_MPI}>
  GPULEDGER_HAVE_BLAS=$<BOOL:${GPULEDGER_HAVE_BLAS}>)
