"""Benchmarks of the recommender: `python -m bench [recommend|record|placement|all]`.

See bench/README.md for what each one measures and the results on the reference machine.
"""
