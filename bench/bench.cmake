# benchmarks (added per issue)
# rpe-bench-attention: time and peak memory of one BERT-base layer per position method.
add_executable(rpe-bench-attention bench/attention_bench.cpp)
target_link_libraries(rpe-bench-attention PRIVATE rpe_core CLI11::CLI11)
if(RPE_USE_PCH)
  target_precompile_headers(rpe-bench-attention REUSE_FROM rpe_core)
endif()
