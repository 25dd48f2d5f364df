"""Part 6, a fleet of replicas behind one router: what each router may read of a replica
(`replica_view`: its load, its queue, its real cached prefix, its blocks to prefill and to
decode), the `routers` (round robin, least outstanding, SGLang's cache-aware router over its
`approximate_tree`, llm-d's exact prefix scorer, Dynamo's cost router) and the `regret` of each
decision (prefix tokens another replica had cached); the capacity `planner` (the cheapest fleet
within an SLO, over a grid of `candidate`s pruned by the roofline, each simulated by
`candidate.evaluate` on one of the `backends`: serial, local processes or Ray); the `fleet` itself,
N replicas on one clock behind a router, and prefill/decode `disaggregation`. The lab `fleet`
shows the routers side by side, the lab `plan` the planner (docs/fleet.md).
"""
