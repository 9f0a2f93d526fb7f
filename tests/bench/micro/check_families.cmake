# cmake -DGPL_MICRO=<gpl_micro> -P check_families.cmake: fails unless
# `gpl_micro --benchmark_list_tests` lists every op family.
execute_process(COMMAND ${GPL_MICRO} --benchmark_list_tests --gpl_backends=cpu
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpl_micro --benchmark_list_tests failed (${rc}): ${err}")
endif()
set(patterns
  "gemm/cpu/llama3-8b/qkv/fwd/" "gemm/cpu/llama3-8b/o/dgrad/" "gemm/cpu/llama3-8b/gate/wgrad/"
  "gemm/cpu/llama3-8b/up/fwd/" "gemm/cpu/llama3-8b/down/fwd/" "gemm/cpu/llama3-8b/lm_head/fwd/"
  "gemm/cpu/llama3-70b:tp8/qkv/fwd/" "gemm/cpu/gpt2/qkv/fwd/"
  "attention/cpu/llama3-8b/materialized/fwd/" "attention/cpu/llama3-8b/materialized/bwd/"
  "attention/cpu/llama3-8b/flash/fwd/" "attention/cpu/llama3-8b/flash/bwd/"
  "norm/cpu/gpt2/layernorm/fwd/" "norm/cpu/llama3-8b/rmsnorm/bwd/"
  "rope/cpu/llama3-8b/q/fwd/" "softmax/cpu/llama3-8b/fwd/" "cross_entropy/cpu/llama3-8b/bwd/"
  "adamw/cpu/fp32/params:1000000" "adamw/cpu/bf16/params:100000000" "sgd/cpu/bf16/params:1000000"
  "adagrad/cpu/fp32/params:1000000" "lion/cpu/bf16/params:1000000"
  "kv_cache_write/cpu/llama3-8b/paged/bf16/" "kv_cache_write/cpu/llama3-8b/contiguous/int8/"
  "cached_attention/cpu/llama3-8b/paged/fp8/" "cached_attention/cpu/llama3-8b/contiguous/bf16/"
  "convert/cpu/fp32_to_bf16/" "ledger/book_unbook" "ledger/flop_count/meta"
  "seq:1024" "seq:8192")
foreach(p ${patterns})
  string(FIND "${out}" "${p}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "gpl_micro --benchmark_list_tests does not list '${p}'")
  endif()
endforeach()
