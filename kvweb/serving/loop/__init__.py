"""The continuous-batching loop every scheduler runs on, its data, a step's price and a run's figures."""
