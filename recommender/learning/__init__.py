"""Learning from recorded executions: datasets from SQL, fitted models as plain parameters,
calibration, and the retraining job that promotes a version only when it beats the one serving.
"""
