"""trnsim kernel library: one module per kernel, each with its numpy reference."""
