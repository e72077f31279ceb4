"""The gRPC adapter: servicers, conversion between messages and core values, server, auth."""
