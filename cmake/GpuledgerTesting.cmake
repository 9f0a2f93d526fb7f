# Test helpers: gpl_add_test (one process, label unit), gpl_add_mpi_test
# (mpiexec -n NP, oversubscribed, root allowed, label mpi), gpl_add_gpu_test
# (label gpu, exit 77 = skipped when no GPU is present).
find_package(GTest REQUIRED)

function(gpl_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main gpl_options)
  add_test(NAME ${name} COMMAND ${name})
  set(labels unit ${T_LABELS})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=2;OPENBLAS_NUM_THREADS=2")
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
