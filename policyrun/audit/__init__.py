"""Re-evaluating a claim and signing statements about it; running a rulebook's own tests."""
