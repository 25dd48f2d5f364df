"""The schedulers on the loop (the papers' engine, vLLM V1, SGLang), each with its quiet steps beside it."""
