"""GPU probes: what the driver reports about the GPUs, without touching them."""
