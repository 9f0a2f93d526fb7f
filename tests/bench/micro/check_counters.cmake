# cmake -DGPL_MICRO=<gpl_micro> -DGPL_ARGS=<tiny flags> -P check_counters.cmake:
# one GEMM and one norm against a datasheet peak, JSON to stdout; each must
# carry its counters.
execute_process(COMMAND ${GPL_MICRO} ${GPL_ARGS} --gpl_peak=h100-sxm --benchmark_format=json
                "--benchmark_filter=^gemm/cpu/tiny-llama/qkv/fwd|^norm/cpu/tiny-llama/rmsnorm/fwd"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpl_micro failed (${rc}): ${err}")
endif()
foreach(counter flops_per_s pct_of_peak bytes_per_s pct_of_bandwidth "pct_of_peak against")  # the context line naming the source
  string(FIND "${out}" "${counter}\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "no '${counter}' in gpl_micro's JSON:\n${out}")
  endif()
endforeach()
