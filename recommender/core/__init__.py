"""The domain: GPU catalog, placement, estimation, throughput, policy and the use cases.

Knows nothing of gRPC, protobuf, SQL or scikit-learn (import-linter keeps it so); the adapters
around it (store, learning, rpc, report, cli, evaluation) depend on it, never the other way.
"""
