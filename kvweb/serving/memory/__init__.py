"""Where the KV lives: paged blocks, reserved ranges in arenas, prefix caches, hybrid groups and the host tier."""
