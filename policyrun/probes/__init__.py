"""Probes collect facts. See `policyrun.probes.base` for the contract and
`policyrun.probes.registry` for the built-in kinds."""
