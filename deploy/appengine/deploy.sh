#!/usr/bin/env bash
# Deploy clusterbot to App Engine flexible with the app.yaml and Dockerfile at the top of the
# repository. Secrets are read from Secret Manager and written only into a temporary copy of
# app.yaml, removed on exit.
#
#   PROJECT=my-project CLUSTERBOT_TARGETS=my-project/us-central1 \
#   CLUSTERBOT_ALERT_CHANNEL=C0123ABCD CLUSTERBOT_DATABASE_URL=postgresql+asyncpg://... \
#   deploy/appengine/deploy.sh [policy.toml]
#
# Secret Manager must hold slack-bot-token and slack-signing-secret (names overridable with
# BOT_TOKEN_SECRET and SIGNING_SECRET_SECRET).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${PROJECT:?set PROJECT to the Google Cloud project}"
: "${CLUSTERBOT_TARGETS:?set CLUSTERBOT_TARGETS, e.g. my-project/us-central1}"
: "${CLUSTERBOT_ALERT_CHANNEL:?set CLUSTERBOT_ALERT_CHANNEL to a channel id}"
export CLUSTERBOT_TARGETS CLUSTERBOT_ALERT_CHANNEL
export CLUSTERBOT_DATABASE_URL="${CLUSTERBOT_DATABASE_URL:-sqlite+aiosqlite:////var/lib/clusterbot/clusterbot.db}"
secret() { gcloud secrets versions access latest --project "$PROJECT" --secret "$1"; }
SLACK_BOT_TOKEN=$(secret "${BOT_TOKEN_SECRET:-slack-bot-token}")
SLACK_SIGNING_SECRET=$(secret "${SIGNING_SECRET_SECRET:-slack-signing-secret}")
export SLACK_BOT_TOKEN SLACK_SIGNING_SECRET

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r "$root/bot" "$root/handlers" "$root/pyproject.toml" "$root/README.md" "$root/Dockerfile" \
  "$root/.dockerignore" "$stage/"
rm -rf "$stage/bot/sandbox"  # the local stand-ins are for tests and the demo, never deployed
if [ -n "${1:-}" ]; then
  # the policy file is baked into the image at the path app.yaml names
  printf 'COPY --chown=clusterbot:clusterbot %s /var/lib/clusterbot/policy.toml\n' policy.toml >> "$stage/Dockerfile"
  cp "$1" "$stage/policy.toml"
fi
envsubst < "$root/app.yaml" > "$stage/app.yaml"
[ -n "${1:-}" ] || sed -i '/CLUSTERBOT_POLICY_FILE/d' "$stage/app.yaml"
(cd "$stage" && gcloud app deploy app.yaml --project "$PROJECT" --quiet)
