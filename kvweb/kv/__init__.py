"""Part 2, PagedAttention on a real model: the mini transformer (`model`, `generate`,
`prompts`), its two KV stores (`contiguous_store`, and `paged_store` over a `block_pool` with
block tables and reference counts), continuous `batching`, fork and copy-on-write
(`parallel_sampling`) and `beam_search`. Shown by the labs `block-tables`,
`paged-equivalence`, `parallel-sampling` and `beam-search`.
"""
