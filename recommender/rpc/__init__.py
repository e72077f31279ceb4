"""The gRPC layer: servicers, conversions, server, auth, metrics, tracing."""
