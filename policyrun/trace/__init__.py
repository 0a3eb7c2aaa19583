"""The trace every consumer reads: its model, consistency, exceptions, headlines, signed envelopes."""
