"""What pricing steps with measured kernels costs a serving run: the schedulers lab's runs with
`cost_model=measured` beside the same runs with the roofline, each as the best of cold runs, in
one sitting (a ratio: this machine is shared). The issue's goal: at most 1.3x.

    .venv/bin/python -m bench.measured_cost
    node scripts/pyodide_run.mjs build/pyodide-test -m bench.measured_cost   # the same in Pyodide
"""

from __future__ import annotations

import kvweb.labs  # noqa: F401  (registers every lab)
from bench.timing import best_of
from kvweb.lab import LABS

RUNS = [  # scenario B's GPU and model have tables; the workloads every figure of docs/accuracy.md's table uses
    {"scenario": "B", "requests": 300},
    {"scenario": "B", "requests": 300, "workload": "sharegpt", "rate": 8.0},
    {"scenario": "B", "requests": 200, "workload": "few-shot"},
]


def main() -> None:
    print(f"{'run':<48} {'roofline s':>10} {'measured s':>10} {'ratio':>6}")
    for params in RUNS:
        roofline = best_of(lambda: LABS["schedulers"](**params).run(), cold=True)
        measured = best_of(lambda: LABS["schedulers"](**params, cost_model="measured").run(), cold=True)
        name = " ".join(f"{k}={v}" for k, v in params.items())
        print(f"{name:<48} {roofline:>10.3f} {measured:>10.3f} {measured / roofline:>6.2f}")


if __name__ == "__main__":
    main()
