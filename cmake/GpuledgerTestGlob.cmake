# gpl_add_tests_in(DIR LIBS...): every DIR/test_*.cpp becomes one test
# executable (named after the file) linked to LIBS. One file = one test binary,
# so adding a test never edits a CMakeLists.
function(gpl_add_tests_in dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${dir}/test_*.cpp)
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    gpl_add_test(${name} SOURCES ${src} LIBS ${ARGN})
  endforeach()
endfunction()
