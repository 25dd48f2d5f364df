"""Part 3, the serving simulator on the paper GPU: request `workload`s, memory managers
(`paged_memory` in blocks, `reserved_memory` in contiguous ranges placed by an `allocator`,
and their `fragmentation`), the `engine` (continuous batching, preemption by swap or
recompute) with its `engine_setup` and `engine_trace`, `metrics` and the `max_rate` search.
Shown by the labs `engine`, `max-rate`, `sweep`, `recovery` and `fragmentation`.
"""
