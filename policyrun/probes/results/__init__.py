"""Results probes: files a run wrote and a person or CI hands over (JUnit XML, pytest report logs,
evaluation and benchmark results)."""
