"""Part 4, prefix reuse (SGLang's RadixAttention): the `radix_cache` (a radix tree over a
shared token pool, LRU eviction), cache-aware scheduling (`cache_schedule`) on prefix-sharing
workloads (`cache_workload`; `served_workload` gives them arrival times for the serving
simulator), vLLM's chained-hash block cache (`prefix_hash`) and the radix cache on the real
mini model (`radix_demo`). Shown by the labs `radix-demo`, `cache-schedule`, `cache-sweep`,
`prefill-savings`, `prefix-hash` and, inside the serving simulator, `schedulers`.
"""
