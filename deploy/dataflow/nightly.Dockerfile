# Flex Template image of the newsflow nightly loop: the streaming template image (deploy/dataflow/Dockerfile,
# which already holds newsflow, its models and the template launcher) with the nightly entry point.
# Build after the streaming image, from the repository root:
#   docker build -f deploy/dataflow/nightly.Dockerfile \
#     --build-arg BASE_IMAGE=REGION-docker.pkg.dev/PROJECT/newsflow/streaming:TAG \
#     -t REGION-docker.pkg.dev/PROJECT/newsflow/nightly:TAG .
#   gcloud dataflow flex-template build gs://BUCKET/templates/newsflow-nightly.json \
#     --image REGION-docker.pkg.dev/PROJECT/newsflow/nightly:TAG --sdk-language PYTHON \
#     --metadata-file deploy/dataflow/nightly-metadata.json
# The launcher runs jobs/nightly_template.py, which flushes the reader events, submits the four nightly
# Beam jobs one after another (each waits until done) and switches Redis to the night's models.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ENV FLEX_TEMPLATE_PYTHON_PY_FILE="/template/jobs/nightly_template.py"
