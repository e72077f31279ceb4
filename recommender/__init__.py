"""IntelliScale recommender."""
