"""`gangkeeper bench`: the benchmarks, each measured in one run and written to bench/RESULTS.md."""
