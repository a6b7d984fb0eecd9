"""newsflow: pure domain logic and shared plumbing (no Apache Beam imports).

SimHash, the LSH band index, near-duplicate clustering, stores (Redis, Parquet),
extraction and language wrappers, configuration, evaluation and the CLI.
"""

__version__ = "0.1.0"
