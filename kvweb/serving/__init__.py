"""Part 3, the serving simulator on the paper GPU: request `workload`s and their `arrivals`,
memory managers (`paged_memory` in blocks, `reserved_memory` in contiguous ranges of an `arena`
placed `first_fit`, `buddy` or without holes, `ideal_arena`, chosen by name in `allocator`, and their
`fragmentation`), one continuous-batching loop (`continuous_batching`,
its data `sequence`, `step_cost`) and three schedulers on it: the papers' engine (`paper_scheduler`, whole prefills,
preemption by swap or recompute) with its `engine_setup` and `engine_trace`, vLLM V1
(`v1_scheduler`, chunked prefill under a token budget, automatic `prefix_caching` of full
blocks) and SGLang (`radix_scheduler`, over a radix cache the lab passes in), each with its
quiet steps beside it (`paper_quiet`, `v1_quiet`, `radix_quiet`), and a `host_tier` of
host memory under today's two; `metrics` and the `max_rate` search. Shown by the
labs `engine`, `max-rate`, `sweep`, `recovery`, `fragmentation` and `schedulers`.
"""
