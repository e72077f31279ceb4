"""The domain: knows nothing of gRPC, protobuf, SQL or scikit-learn."""
