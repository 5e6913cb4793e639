# benchmarks (added per issue)
# Data pipeline: tokenization / prepare-data MB/s and masking + batching tokens/s (issue 4).
add_executable(data_bench bench/data_bench.cpp)
target_link_libraries(data_bench PRIVATE rpe_core)
