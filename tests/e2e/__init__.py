"""End-to-end tests: the documented commands and examples, run as a user runs them."""
