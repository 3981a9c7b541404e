print("benchmarks land with issue 8")
