"""The pure domain: no gRPC, protobuf, SQL or scikit-learn."""
