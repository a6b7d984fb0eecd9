"""Apache Airflow DAG of the newsflow nightly learning loop (Airflow 2.x + apache-airflow-providers-apache-beam).

One DAG run per night, for the run's logical date ``{{ ds }}``::

    flush_events -> snapshot_stories -> decay_rates -> interest_vectors -> ranking_weights -> switch_models

``flush_events`` and ``switch_models`` run ``newsflow nightly --step flush|switch`` (each under the
date's Redis lock); the four jobs are Beam pipelines started by the Beam operator
(``BeamRunPythonPipelineOperator``: ``<python> -m newsflow.jobs.<job> --runner=... --date=... ...``), on Dataflow in
production (``NEWSFLOW_BEAM_RUNNER=DataflowRunner`` plus the ``NEWSFLOW_BEAM_OPTIONS`` JSON, e.g.
``{"project": "...", "region": "...", "temp_location": "gs://...", "output": "gs://..."}``), or
the DirectRunner on the Airflow worker. ``max_active_runs=1``: Airflow never runs two nights at once;
a failed task leaves the previous night's models serving (the switch runs last).

Settings come from the worker's environment: ``NEWSFLOW_HOME`` (checkout with ``.venv``, default
/opt/newsflow), ``REDIS_URL``, ``NEWSFLOW_KEY_PREFIX``, ``NEWSFLOW_DATA_DIR``.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator

NEWSFLOW_HOME = os.environ.get("NEWSFLOW_HOME", "/opt/newsflow")
PYTHON = os.path.join(NEWSFLOW_HOME, ".venv", "bin", "python")
RUNNER = os.environ.get("NEWSFLOW_BEAM_RUNNER", "DirectRunner")
BEAM_OPTIONS = json.loads(os.environ.get("NEWSFLOW_BEAM_OPTIONS", "{}"))
JOBS = ("snapshot_stories", "decay_rates", "interest_vectors", "ranking_weights")
NIGHTLY = f"cd {NEWSFLOW_HOME} && {PYTHON} -m newsflow.cli nightly --date {{{{ ds }}}}"

with DAG(
    dag_id="newsflow_nightly",
    description="newsflow nightly learning loop: events -> decay, interests, weights -> Redis switch",
    schedule="15 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    tags=["newsflow"],
) as dag:
    flush = BashOperator(task_id="flush_events", bash_command=f"{NIGHTLY} --step flush", cwd=NEWSFLOW_HOME)
    previous = flush
    for job in JOBS:
        task = BeamRunPythonPipelineOperator(
            task_id=job,
            runner=RUNNER,
            py_file=f"newsflow.jobs.{job}",
            py_options=["-m"],
            py_interpreter=PYTHON,
            pipeline_options={**BEAM_OPTIONS, "date": "{{ ds }}"},
        )
        previous >> task
        previous = task
    switch = BashOperator(task_id="switch_models", bash_command=f"{NIGHTLY} --step switch", cwd=NEWSFLOW_HOME)
    previous >> switch
