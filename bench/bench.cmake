# Benchmarks: each prints ratios measured in one run; results go to bench/results/
# Data pipeline: tokenization / prepare-data MB/s and masking + batching tokens/s (issue 4).
add_executable(data_bench bench/data_bench.cpp bench/data_bench_child.cpp)
target_link_libraries(data_bench PRIVATE rpe_core)
if(RPE_USE_PCH)
  target_precompile_headers(data_bench REUSE_FROM rpe_core)
endif()
# rpe-bench-attention: time and peak memory of one BERT-base layer per position method.
add_executable(rpe-bench-attention bench/attention_bench.cpp)
target_link_libraries(rpe-bench-attention PRIVATE rpe_core CLI11::CLI11)
if(RPE_USE_PCH)
  target_precompile_headers(rpe-bench-attention REUSE_FROM rpe_core)
endif()
# rpe-bench-model: whole-model MLM training throughput per method (JSON lines), beside
# bench/hf_bench.py; scripts/gpu_check.sh turns both into bench/results/gpu_<device>.md.
add_executable(rpe-bench-model bench/model_bench.cpp)
target_link_libraries(rpe-bench-model PRIVATE rpe_core CLI11::CLI11)
if(RPE_USE_PCH)
  target_precompile_headers(rpe-bench-model REUSE_FROM rpe_core)
endif()
# rpe-bench-optim: one optimizer step over BERT's parameters, LibTorch's AdamW loop vs the
# _foreach AdamW training uses vs LAMB (time and ops per step); gpu_check.sh reports it.
add_executable(rpe-bench-optim bench/optim_bench.cpp)
target_link_libraries(rpe-bench-optim PRIVATE rpe_core CLI11::CLI11)
if(RPE_USE_PCH)
  target_precompile_headers(rpe-bench-optim REUSE_FROM rpe_core)
endif()
