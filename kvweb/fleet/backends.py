"""Where the planner's candidates are simulated: here, one after another (`Serial`, the only one a
browser can use), in local processes (`Processes`, concurrent.futures), or on Ray (`RayBackend`,
a local Ray or a cluster's address; `pip install kvweb[ray]`, imported only when chosen).

Every backend evaluates the same jobs (candidate, workload, the candidate's own seed) with the
same pure function and returns the figures in the jobs' order, so results are identical across
backends. `done(finished, total, key)` is called after each candidate; a progress sink that
raises `Cancelled` there stops the plan between candidates (what is still queued is dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kvweb.fleet.candidate import Candidate, Workload, evaluate
from kvweb.lab import ParamError, shown

Job = tuple[Candidate, Workload, int]
Done = Callable[[int, int, str], None]
BACKENDS = ("serial", "processes", "ray")


def evaluate_job(job: Job) -> dict[str, Any]:
    """One job (a module-level function: processes and Ray ship it by name)."""
    return evaluate(*job)


class Serial:
    name = "serial"

    def map(self, jobs: Sequence[Job], done: Done) -> list[dict[str, Any]]:
        results = []
        for job in jobs:
            results.append(evaluate_job(job))
            done(len(results), len(jobs), job[0].key)
        return results


class Processes:
    """A pool of `workers` local processes, one candidate per task."""

    name = "processes"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def map(self, jobs: Sequence[Job], done: Done) -> list[dict[str, Any]]:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        results: list[dict[str, Any]] = [{} for _ in jobs]
        pool = ProcessPoolExecutor(self.workers)
        try:
            futures = {pool.submit(evaluate_job, job): i for i, job in enumerate(jobs)}
            for count, future in enumerate(as_completed(futures), 1):
                i = futures[future]
                results[i] = future.result()
                done(count, len(jobs), jobs[i][0].key)
        finally:
            pool.shutdown(cancel_futures=True)
        return results


class RayBackend:
    """Ray tasks, one candidate each: on the cluster at `address`, or on a local Ray of `workers`
    CPUs started here (and stopped after). A Ray already initialised in this process is used as it is."""

    name = "ray"

    def __init__(self, workers: int, address: str | None = None) -> None:
        self.workers = workers
        self.address = address

    def map(self, jobs: Sequence[Job], done: Done) -> list[dict[str, Any]]:
        try:
            import ray
        except ImportError:
            raise ParamError(
                "backend: ray is not installed; pip install kvweb[ray], or use --backend processes"
            ) from None
        started = not ray.is_initialized()
        if started:
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
        pending: list[Any] = []
        try:
            task = ray.remote(num_cpus=1)(evaluate_job)
            refs = [task.remote(job) for job in jobs]
            index = {ref: i for i, ref in enumerate(refs)}
            results: list[dict[str, Any]] = [{} for _ in jobs]
            pending, count = list(refs), 0
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    i = index[ref]
                    results[i] = ray.get(ref)
                    count += 1
                    done(count, len(jobs), jobs[i][0].key)
            return results
        finally:
            for ref in pending:
                ray.cancel(ref)
            if started:
                ray.shutdown()


def backend(name: str, workers: int = 1, address: str | None = None) -> Serial | Processes | RayBackend:
    """A backend by name (the CLI's --backend, --workers, --address)."""
    if name == "serial":
        return Serial()
    if name == "processes":
        return Processes(workers)
    if name == "ray":
        return RayBackend(workers, address)
    raise ParamError(f"backend: {shown(name)} is not allowed; expected one of {', '.join(BACKENDS)}")
