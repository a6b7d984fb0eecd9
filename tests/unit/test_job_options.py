"""Every job's Beam options can live in one process: Beam registers every PipelineOptions subclass on one
argparse parser, so two job modules defining the same flag break every job once both are imported."""

import importlib
import pkgutil

from apache_beam.options.pipeline_options import PipelineOptions

from newsflow import jobs, pipelines


def test_all_job_options_parse_together():
    for package in (pipelines, jobs):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")
    names = {cls.__name__ for cls in PipelineOptions.__subclasses__()}
    assert {"NewsflowOptions", "NightlyOptions", "SettingsOptions"} <= names
    opts = PipelineOptions(["--output", "/tmp/x", "--date", "2024-05-01", "--input", "a.jsonl"]).get_all_options()
    assert (opts["output"], opts["date"], opts["input"]) == ("/tmp/x", "2024-05-01", ["a.jsonl"])
