"""One module per command; each exposes `add_parser(sub)` and `run(args) -> int`."""
