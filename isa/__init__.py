"""Machine descriptions as data (installed as trnsim._isa): chips/, instructions/, engines.yaml."""
