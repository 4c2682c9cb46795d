"""Speed benchmarks (not part of the installed package); see README.md."""
