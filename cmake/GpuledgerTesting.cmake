# Test helpers: gpl_add_test (one process, label unit), gpl_add_mpi_test
# (mpiexec -n NP, oversubscribed, root allowed, label mpi), gpl_add_gpu_test
# (label gpu, exit 77 = skipped when no GPU is present).
find_package(GTest REQUIRED)

# The tests' own translation units are compiled with -Og, whatever the build
# type: the code under test is in the libraries, built at the build type's
# level (-O3 for Release), while a test file's cost is compiling GoogleTest's
# and nlohmann/json's templates, which -Og halves (18 s -> 9 s of CPU for
# test_cli_infer.cpp with GCC 12). On CI's two cores the tests' files are most
# of the compile time of every build.
add_library(gpl_test_options INTERFACE)
target_compile_options(gpl_test_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Og>)
target_link_libraries(gpl_test_options INTERFACE gpl_options)

# OpenMP threads per unit test. ctest runs one test per core (-j nproc), so two
# threads per test already oversubscribe; they stay at 2 in the main build so
# that the threaded paths are tested. In the sanitizer build one thread: the
# instrumented code is slower, and the spinning workers of two tests on two
# cores took a third of its time; the threaded paths run in the main build.
if(GPULEDGER_SANITIZE)
  set(GPL_TEST_THREADS 1)
else()
  set(GPL_TEST_THREADS 2)
endif()

# Label platform: a unit test whose result depends on how this build was
# configured — every test of a folder that sets GPL_PLATFORM_TESTS (the CPU
# kernels: BLAS, the ISA paths, OpenMP threads), and any test whose source reads
# a GPULEDGER_HAVE_* switch. With GPULEDGER_GENERIC_UNIT_TESTS=OFF only these
# unit tests (and the CLI tests) are built: scripts/test.sh's main build, whose
# other unit tests run once, in the sanitizer build.
function(gpl_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  set(labels unit ${T_LABELS})
  set(platform ${GPL_PLATFORM_TESTS})
  foreach(src ${T_SOURCES})
    file(STRINGS ${src} reads_switch REGEX "GPULEDGER_HAVE_")
    if(reads_switch)
      set(platform ON)
    endif()
  endforeach()
  if(platform)
    list(APPEND labels platform)
  elseif(NOT GPULEDGER_GENERIC_UNIT_TESTS AND NOT "cli" IN_LIST labels)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main gpl_test_options)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=${GPL_TEST_THREADS};OPENBLAS_NUM_THREADS=${GPL_TEST_THREADS}")
endfunction()

set(GPL_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_btl=self,vader;OMPI_MCA_pml=ob1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")

function(gpl_add_mpi_test name np exe)
  if(NOT GPULEDGER_HAVE_MPI)
    return()
  endif()
  add_test(NAME ${name} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np}
           --oversubscribe ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${exe}> ${MPIEXEC_POSTFLAGS} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "mpi" PROCESSORS ${np} TIMEOUT 900
    ENVIRONMENT "${GPL_MPI_ENV}")
endfunction()

function(gpl_add_gpu_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest gpl_options)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endfunction()
include(GpuledgerTestGlob)
