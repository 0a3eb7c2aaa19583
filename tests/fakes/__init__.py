"""Faithful fakes of the libraries and system interfaces the machine probes talk to."""
