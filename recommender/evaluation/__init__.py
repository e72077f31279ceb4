"""Replays of traces and generated workloads through the service and the baselines."""
