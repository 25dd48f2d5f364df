"""Part 3, the serving simulator on the paper GPU, in four rooms:

- `load/`: what comes in. Seeded request `workload`s, their `arrivals` (open loop, closed loop,
  chat turns), and production `traces` as files (with the shipped `trace_presets/`).
- `loop/`: the one continuous-batching loop (`continuous_batching`), what a scheduler implements
  for it (`scheduler_interface`), its data (`sequence`), a step's price (`step_cost`), the
  reference scenarios turned into a ready run (`engine_setup`), the run sampled for animation
  (`engine_trace`), its `metrics` and the `max_rate` search.
- `schedulers/`: the schedulers on that loop, each with its quiet steps beside it: the papers'
  engine (`paper_scheduler`, `paper_quiet`: whole prefills, preemption by swap or recompute),
  vLLM V1 (`v1_scheduler`, `v1_quiet`, speculative decoding's memory side in `spec_decode`) and
  SGLang (`radix_scheduler`, `radix_quiet`, speculative decoding's memory side in `radix_spec`, and its
  pools for window and linear layers `swa_scheduler`, `mamba_scheduler`).
- `memory/`: where the KV lives. `paged_memory` in blocks, `reserved_memory` in contiguous
  ranges of an `arena` placed `first_fit`, `buddy` or without holes (`ideal_arena`), chosen by name
  in `allocator`, and their `fragmentation`; vLLM's `prefix_caching` of full blocks, its KV cache
  groups for mixed layers (`hybrid_kv`) and its start-up size (`kv_capacity`); a `host_tier` of
  host memory under the prefix caches.

Shown by the labs `engine`, `max-rate`, `sweep`, `recovery`, `fragmentation`, `schedulers` and `fleet`.
"""
