"""The fleet's routers: which replica gets a request, from read-only replica views.

Every router answers `route(request, replicas) -> replica index` at the request's arrival (its
clock), keeps its own state (round robin's counter, the cache-aware router's tree) and says in
`reason` which of its rules chose. Ties go to the lowest index. docs/fleet.md, "Routers", says
what each follows in its project and where kvweb simplifies:

- `RoundRobin`: the next replica in turn.
- `LeastOutstanding`: the fewest requests running + waiting.
- `CacheAware`: SGLang's router (sgl-router `policies/cache_aware.rs`) over an `ApproximateTree`
  of what it sent where, with its documented defaults; a weak match goes to the least loaded.
- `ExactPrefix`: llm-d's precise prefix-cache scorer with its queue scorer: each replica's real
  cached prefix (KV events there, the cache itself here) against its waiting queue.
- `CostRouter`: Dynamo's KV router: overlap weight x blocks to prefill + blocks decoding, lowest.
- `LoraAffinity`: llm-d's lora-affinity scorer beside its queue scorer: a replica that has the
  request's LoRA adapter loaded, else one whose batch has room for another adapter.

With LoRA adapters a prefix is the adapter's: the prefix routers probe each replica's cache under
the request's adapter, and the cache-aware router keeps one tree per adapter. With images a prefix
is the images' too: the probe hashes each image's mm hash into its blocks as vLLM does, and the
cache-aware router reads an image as its own text (`router_text`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from kvweb.fleet.approximate_tree import ApproximateTree
from kvweb.fleet.replica_view import Adapters, ReplicaView
from kvweb.serving.loop.sequence import TOKEN_BASE
from kvweb.serving.load.workload import Request

NO_TOKENS = np.zeros(0, dtype=np.int64)


def prompt_of(request: Request) -> np.ndarray:
    """The request's prompt tokens (none when it has no content: it shares no prefix)."""
    return NO_TOKENS if request.tokens is None else request.tokens[: request.prompt]


def router_text(request: Request) -> np.ndarray:
    """The prompt as SGLang's router reads it, its text: an image is its URL or data there, so the
    same image is the same text and another image differs; here each image's placeholders are
    keyed by its mm hash (negative ids: no text token is one). Without content: `unique_prompt`."""
    if request.tokens is None:
        return unique_prompt(request)
    prompt = prompt_of(request)
    if not request.images:
        return prompt
    text = prompt.copy()
    for image in request.images:
        text[image.offset : image.offset + image.length] = -image.mm_hash
    return text


def unique_prompt(request: Request) -> np.ndarray:
    """A prompt without content as text of its own (the ids `Seq.content` gives it): SGLang's
    router inserts every request's text in its tree, so each tenant's size grows with the
    prompts sent to it (what the periodic trim counts) and a later request can match it."""
    return np.arange(request.prompt, dtype=np.int64) + TOKEN_BASE * (request.id + 1)


def lowest(values: Sequence[float]) -> int:
    """Index of the smallest value, the first of equals."""
    return min(range(len(values)), key=values.__getitem__)


class Router:
    name = ""

    def __init__(self) -> None:
        self.reason = ""  # the rule that chose the last replica

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        raise NotImplementedError


class RoundRobin(Router):
    name = "round-robin"

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        self.reason = "turn"
        i = self.count % len(replicas)
        self.count += 1
        return i


class LeastOutstanding(Router):
    name = "least-outstanding"

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        self.reason = "load"
        return lowest([r.outstanding() for r in replicas])


class CacheAware(Router):
    """SGLang's cache-aware router. Load imbalanced (max - min > `balance_abs_threshold` and
    max > `balance_rel_threshold` x min, load = outstanding requests): the least loaded replica.
    Else the tree's longest match, if it covers more than `cache_threshold` of the prompt, goes
    to the replica it names; otherwise to the least loaded replica (SGLang PR #14650, Dec 2025:
    "pick min load instead of min tenant size"; before it, the replica with the smallest tree).
    Either way the prompt is inserted for the chosen replica. Every `eviction_interval` seconds
    the tree is trimmed to `max_tree_size` tokens per replica. Defaults: sgl-router's command
    line (0.3, 64, 1.5, 120 s, 2^26). Ties go to the lowest index (Rust's `min_by_key`)."""

    name = "cache-aware"

    def __init__(
        self,
        n_replicas: int,
        cache_threshold: float = 0.3,
        balance_abs_threshold: int = 64,
        balance_rel_threshold: float = 1.5,
        eviction_interval: float = 120.0,
        max_tree_size: int = 2**26,
    ) -> None:
        super().__init__()
        self.n_replicas = n_replicas
        self.trees = {0: ApproximateTree(n_replicas)}  # one per adapter (sgl-router: one per model id)
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.eviction_interval = eviction_interval
        self.max_tree_size = max_tree_size
        self.next_eviction: float | None = None  # the first request starts the eviction clock

    @property
    def tree(self) -> ApproximateTree:
        """The base model's tree."""
        return self.trees[0]

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        now = request.arrival
        self._trim(now)
        tree = self.trees.get(request.adapter)
        if tree is None:
            tree = self.trees[request.adapter] = ApproximateTree(self.n_replicas)
        prompt = router_text(request)
        loads = [r.outstanding() for r in replicas]
        high, low = max(loads), min(loads)
        if high - low > self.balance_abs_threshold and high > self.balance_rel_threshold * low:
            self.reason, i = "balance", lowest(loads)
        else:
            matched, tenant = tree.prefix_match(prompt, now)
            if len(prompt) and matched / len(prompt) > self.cache_threshold and tenant is not None:
                self.reason, i = "match", tenant
            else:
                self.reason, i = "least loaded", lowest(loads)
        tree.insert(prompt, i, now)
        return i

    def _trim(self, now: float) -> None:
        """The periodic eviction, run when its time has come (SGLang: a background thread)."""
        if self.next_eviction is None:
            self.next_eviction = now + self.eviction_interval
        elif now >= self.next_eviction:
            for tree in self.trees.values():
                tree.evict(self.max_tree_size)
            periods = math.floor((now - self.next_eviction) / self.eviction_interval) + 1
            self.next_eviction += periods * self.eviction_interval


class ExactPrefix(Router):
    """llm-d's precise prefix-cache scorer beside its queue scorer, then the highest total.
    Prefix score: each replica's real cached prefix of the prompt, min-max normalised over the
    replicas (all equal: 1 each); queue score: (most waiting - waiting) / (most - fewest) (all
    equal: 1). Weights 2 and 1, as llm-d's precise-prefix examples (their kv-cache-utilization
    scorer, weight 1 there, is left out). A replica with less cached wins only on a shorter queue:
    `reason` "queue" then, "prefix" otherwise."""

    name = "exact-prefix"

    def __init__(self, prefix_weight: float = 2.0, queue_weight: float = 1.0) -> None:
        super().__init__()
        self.prefix_weight = prefix_weight
        self.queue_weight = queue_weight

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        prompt = prompt_of(request)
        matches = [r.prefix_match(prompt, request.adapter, request.images) for r in replicas]
        queue = [-r.waiting() for r in replicas]  # fewer waiting scores higher
        total = [self.prefix_weight * p + self.queue_weight * q for p, q in zip(_min_max(matches), _min_max(queue))]
        i = lowest([-t for t in total])
        self.reason = "prefix" if matches[i] == max(matches) else "queue"
        return i


def _min_max(values: Sequence[float]) -> list[float]:
    """Values scaled to [0, 1] over their range; all 1 when they are all equal (llm-d's
    `indexedScoresToNormalizedScoredPods`)."""
    low, high = min(values), max(values)
    return [1.0] * len(values) if high == low else [(v - low) / (high - low) for v in values]


class CostRouter(Router):
    """Dynamo's KV router. For each replica, if the request went there:
    prefill blocks = (its tokens still to prefill + the prompt's tokens not in whole cached
    blocks) / block size; decode blocks = its active blocks + the prompt's blocks not cached;
    cost = `overlap_score_weight` x prefill blocks + decode blocks. Temperature 0 (the default)
    takes the lowest cost; above it, a softmax over the costs scaled by their spread, from a
    seeded generator."""

    name = "cost"

    def __init__(
        self, block_size: int = 16, overlap_score_weight: float = 1.0, temperature: float = 0.0, seed: int = 0
    ) -> None:
        super().__init__()
        self.block_size = block_size
        self.overlap_score_weight = overlap_score_weight
        self.temperature = temperature
        self.rng = np.random.default_rng(seed)
        self.costs: list[float] = []  # the last request's cost per replica

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        prompt = prompt_of(request)
        bs = self.block_size
        costs = []
        for r in replicas:
            cached = (
                r.prefix_match(prompt, request.adapter, request.images) // bs
            )  # whole blocks, as Dynamo's overlap counts
            prefill = (r.prefill_tokens() + len(prompt) - cached * bs) / bs
            decode = r.decode_blocks() + -(-len(prompt) // bs) - cached
            costs.append(self.overlap_score_weight * prefill + decode)
        self.costs = costs
        self.reason = "cost"
        return lowest(costs) if self.temperature == 0 else self._sample(costs)

    def _sample(self, costs: list[float]) -> int:
        """Dynamo's `softmax_sample`: logits -cost / (max - min) / temperature."""
        spread = max(costs) - min(costs)
        if spread == 0:
            return int(self.rng.integers(len(costs)))
        logits = np.array([-c / spread / self.temperature for c in costs])
        p = np.exp(logits - logits.max())
        return int(self.rng.choice(len(costs), p=p / p.sum()))


class LoraAffinity(Router):
    """llm-d's lora-affinity scorer (gateway-api-inference-extension, `scorer/lora_affinity.go`)
    beside its queue scorer, then the highest total. llm-d's affinity: 1.0 where the request's
    adapter is active, 0.8 where the running and waiting requests' adapters are fewer than max_loras
    (room to load one more), 0.6 where it is waiting, else 0. llm-d reads "active" from vLLM's gauge
    (the running requests' adapters); kvweb reads the GPU slots (an idle adapter still in one needs
    no load either) and puts a free slot (no adapter to evict) at 0.9, between llm-d's first two.
    Queue: (most waiting - waiting) / (most - fewest), all equal 1. Weights 1 and 1, as the
    inference extension's default profile. Without adapter slots the affinity is equal everywhere
    and the queue decides. `reason`: "adapter", "free slot", "room", "adapter waiting", or "queue"
    where the affinity is alike everywhere or a higher one lost."""

    name = "lora-affinity"

    def __init__(self, affinity_weight: float = 1.0, queue_weight: float = 1.0) -> None:
        super().__init__()
        self.affinity_weight = affinity_weight
        self.queue_weight = queue_weight

    def route(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        affinity = [lora_affinity(request.adapter, r.adapters()) for r in replicas]
        queue = _min_max([-r.waiting() for r in replicas])
        i = lowest([-(self.affinity_weight * a + self.queue_weight * q) for a, q in zip(affinity, queue)])
        lost = min(affinity) == max(affinity) or affinity[i] < max(affinity)
        self.reason = "queue" if lost else AFFINITY_REASONS.get(affinity[i], "queue")
        return i


AFFINITY_REASONS = {1.0: "adapter", 0.9: "free slot", 0.8: "room", 0.6: "adapter waiting"}


def lora_affinity(adapter: int, adapters: Adapters | None) -> float:
    """The affinity of a replica for a request of `adapter` (a replica without slots, or a request
    of the base model: 1.0, every replica alike)."""
    if adapters is None or not adapter or adapter in adapters.loaded:  # a running adapter is in a slot
        return 1.0
    if len(adapters.running | adapters.waiting) < adapters.max_loras:
        return 0.9 if len(adapters.loaded) < adapters.max_loras else 0.8
    return 0.6 if adapter in adapters.waiting else 0.0


ROUTERS: dict[str, Callable[[int], Router]] = {
    RoundRobin.name: lambda n: RoundRobin(),
    LeastOutstanding.name: lambda n: LeastOutstanding(),
    CacheAware.name: CacheAware,
    ExactPrefix.name: lambda n: ExactPrefix(),
    CostRouter.name: lambda n: CostRouter(),
    LoraAffinity.name: lambda n: LoraAffinity(),
}
COMPARED = tuple(r for r in ROUTERS if r != LoraAffinity.name)  # the fleet lab's default: the prefix and load routers
