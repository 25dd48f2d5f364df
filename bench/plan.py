"""Benchmark: a 200-candidate capacity plan on each backend (kvweb/fleet/backends.py).

Run: .venv/bin/python -m bench.plan [--requests 1000] [--no-ray]
(figures go to docs/fleet.md by hand, with the machine's load: `uptime`)

The grid: llama-3-8b (it fits every GPU, so nothing is pruned and every candidate is a
simulation) on 4 GPU types x 2 schedulers x (1 replica + 2..7 replicas x 4 routers) = 200.
Wall time and candidates per second in this process (serial), on 1 and 2 local processes and on
a local Ray of 2 CPUs (its start timed apart: a cluster starts once); parallel efficiency at 2
workers = (1-worker time / 2-worker time) / 2. Every backend's result must equal the serial one.
"""
from __future__ import annotations

import argparse
import os
import time

from kvweb.fleet.backends import Processes, RayBackend, Serial
from kvweb.lab import no_progress
from kvweb.labs.plan import PlanLab

GRID = {"model": "llama-3-8b", "gpus": "A100-40GB,A100-80GB,H100-SXM,H200", "tps": "1", "weight_precisions": "16-bit",
        "kv_precisions": "16-bit", "schedulers": "vllm-v1,sglang", "replicas": "1,2,3,4,5,6,7",
        "routers": "round-robin,least-outstanding,cache-aware,cost", "workload": "sharegpt", "rate": 20.0}


def timed(lab: PlanLab, backend: object) -> tuple[float, dict]:
    start = time.perf_counter()
    result = lab.plan(no_progress, backend)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray backend")
    args = parser.parse_args()
    lab = PlanLab(**GRID, requests=args.requests)
    print(f"load before: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} CPUs)")
    rows = []
    serial_s, reference = timed(lab, Serial())
    n = reference["evaluated"]
    assert reference["candidates_total"] == 200 and n == 200, reference["pruned"]
    rows.append(("serial (this process)", serial_s))
    for workers in (1, 2):
        seconds, result = timed(lab, Processes(workers))
        assert result == reference
        rows.append((f"processes, {workers} worker{'s' if workers > 1 else ''}", seconds))
    if not args.no_ray:
        import ray

        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - start
        seconds, result = timed(lab, RayBackend(2))
        ray.shutdown()
        assert result == reference
        rows.append((f"ray, 2 workers (started in {ray_start:.1f} s, not counted)", seconds))
    print(f"{n} candidates of {args.requests} requests each")
    print(f"{'backend':<48} {'wall s':>8} {'candidates/s':>13}")
    for name, seconds in rows:
        print(f"{name:<48} {seconds:8.2f} {n / seconds:13.1f}")
    one, two = rows[1][1], rows[2][1]
    print(f"parallel efficiency at 2 processes: {one / two / 2:.0%}")
    if not args.no_ray:
        print(f"parallel efficiency of ray at 2 workers (against 1 process): {one / rows[3][1] / 2:.0%}")
    print(f"per candidate, serial: {serial_s / n * 1e3:.0f} ms")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
