# The main build's configuration, sourced by scripts/demo.sh and scripts/test.sh
# so that both configure build/ with the same flags: the second command then
# reuses what the first built instead of rebuilding it. Warnings are errors in
# both. With the sanitizer build of test.sh (SANITIZE=1, the default) the main
# build keeps only the unit tests labelled platform; the others run under the
# sanitizers (README, docs/building.md).
if [ "${SANITIZE:-1}" = "1" ]; then
  MAIN_CONFIG=(-DGPULEDGER_WERROR=ON -DGPULEDGER_GENERIC_UNIT_TESTS=OFF)
else
  MAIN_CONFIG=(-DGPULEDGER_WERROR=ON -DGPULEDGER_GENERIC_UNIT_TESTS=ON)
fi
