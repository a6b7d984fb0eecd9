"""Serving-state and history stores: Redis (cluster state, LSH bands) and Parquet."""
