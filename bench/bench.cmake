# benchmarks (added per issue)
