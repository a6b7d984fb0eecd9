#!/usr/bin/env bash
# Cloud Scheduler job that launches the nightly Flex Template (deploy/dataflow/nightly.Dockerfile +
# nightly-metadata.json) every night at 02:15 UTC for yesterday's date (the template's default).
# Edit BUCKET, the Redis address and the network in deploy/gcp/nightly-launch.json first.
# Usage: PROJECT=my-project REGION=europe-west1 SA=scheduler@my-project.iam.gserviceaccount.com \
#          deploy/gcp/cloud-scheduler-nightly.sh
set -euo pipefail
: "${PROJECT:?set PROJECT}" "${REGION:?set REGION}" "${SA:?set SA (service account with roles/dataflow.developer)}"
here="$(cd "$(dirname "$0")" && pwd)"
gcloud scheduler jobs create http newsflow-nightly \
  --project "$PROJECT" --location "$REGION" \
  --schedule "15 2 * * *" --time-zone "Etc/UTC" \
  --uri "https://dataflow.googleapis.com/v1b3/projects/${PROJECT}/locations/${REGION}/flexTemplates:launch" \
  --http-method POST \
  --headers "Content-Type=application/json" \
  --message-body-from-file "${here}/nightly-launch.json" \
  --oauth-service-account-email "$SA" \
  --oauth-token-scope "https://www.googleapis.com/auth/cloud-platform"
