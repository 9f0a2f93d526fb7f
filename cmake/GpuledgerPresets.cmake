# The model presets (models/presets/*.json) where a binary looks for them
# (core/model_config.cpp, preset_dir()): share/gpuledger/presets in the
# executable's folder or a folder above it. The build keeps a copy in
# <build>/share/gpuledger/presets, refreshed when a preset changes, so that
# build-tree binaries (bench/gpuledger, tests/*/test_*) find it as an installed
# binary finds <prefix>/share/gpuledger/presets. The relative path is fixed
# (not CMAKE_INSTALL_DATADIR): the lookup walks up to it.
set(GPL_PRESET_SUBDIR share/gpuledger/presets)
file(GLOB GPL_PRESET_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/models/presets/*.json)
# A preset removed from the sources leaves the copy too (the glob re-runs
# CMake when the folder's listing changes).
file(GLOB gpl_stale_copies ${PROJECT_BINARY_DIR}/${GPL_PRESET_SUBDIR}/*.json)
foreach(copy ${gpl_stale_copies})
  get_filename_component(name ${copy} NAME)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/models/presets/${name})
    file(REMOVE ${copy})
  endif()
endforeach()
set(gpl_preset_copies)
foreach(src ${GPL_PRESET_FILES})
  get_filename_component(name ${src} NAME)
  set(dst ${PROJECT_BINARY_DIR}/${GPL_PRESET_SUBDIR}/${name})
  add_custom_command(OUTPUT ${dst} COMMAND ${CMAKE_COMMAND} -E copy_if_different ${src} ${dst}
                     DEPENDS ${src} COMMENT "Copying preset ${name}" VERBATIM)
  list(APPEND gpl_preset_copies ${dst})
endforeach()
add_custom_target(gpl_presets ALL DEPENDS ${gpl_preset_copies})

install(FILES ${GPL_PRESET_FILES} DESTINATION ${GPL_PRESET_SUBDIR})
