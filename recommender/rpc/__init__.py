"""gRPC adapters: servicers, conversion, server, auth."""
