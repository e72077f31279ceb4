"""Generated protobuf and gRPC modules (built from proto/ by setup.py; never edit or commit)."""
