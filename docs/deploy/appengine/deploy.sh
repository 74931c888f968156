#!/usr/bin/env bash
# Deploy clusterbot to App Engine flexible with the app.yaml and Dockerfile at the top of the
# repository (docs/DEPLOY.md, step 8a). The settings are filled into a temporary copy of
# app.yaml; the secrets stay in Secret Manager, named by reference, and are read by the
# service itself at start.
#
#   PROJECT=my-project CLUSTERBOT_TARGETS=my-project/us-central1 \
#   CLUSTERBOT_ALERT_CHANNEL=C0123ABCD CLOUD_SQL_INSTANCE=my-project:us-central1:clusterbot \
#   docs/deploy/appengine/deploy.sh policy.toml
#
# Optional: SERVICE (default clusterbot; the app's first service must be "default"),
# SERVICE_ACCOUNT (default clusterbot@PROJECT.iam.gserviceaccount.com), DATABASE and
# DATABASE_USER (default clusterbot), CLUSTERBOT_DATABASE_URL (instead of the Cloud SQL socket
# URL built from them), BOT_TOKEN_REF, SIGNING_SECRET_REF, DATABASE_PASSWORD_REF (default
# sm://PROJECT/slack-bot-token, sm://PROJECT/slack-signing-secret,
# sm://PROJECT/clusterbot-db-password). DRY_RUN=1 prints the filled app.yaml and stops.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
fail() { echo "deploy.sh: $*" >&2; exit 2; }

command -v envsubst >/dev/null ||
  fail "needs envsubst (Debian/Ubuntu: apt-get install gettext-base; macOS: brew install gettext)"
[ -n "${DRY_RUN:-}" ] || command -v gcloud >/dev/null ||
  fail "needs gcloud (https://cloud.google.com/sdk/docs/install)"
[ -n "${PROJECT:-}" ] || fail "set PROJECT to the Google Cloud project App Engine runs in"
[ -n "${CLUSTERBOT_TARGETS:-}" ] || fail "set CLUSTERBOT_TARGETS, e.g. $PROJECT/us-central1"
[ -n "${CLUSTERBOT_ALERT_CHANNEL:-}" ] || fail "set CLUSTERBOT_ALERT_CHANNEL to a channel id (C...)"
if [ -z "${CLUSTERBOT_DATABASE_URL:-}" ]; then
  [ -n "${CLOUD_SQL_INSTANCE:-}" ] || fail "set CLOUD_SQL_INSTANCE to PROJECT:REGION:INSTANCE \
of the Cloud SQL for PostgreSQL instance (docs/DEPLOY.md, step 5): an App Engine instance's \
disk goes with it, and with it every pending request, the audit log and the specs kept for Restore"
  CLUSTERBOT_DATABASE_URL="postgresql+asyncpg://${DATABASE_USER:-clusterbot}@/${DATABASE:-clusterbot}?host=/cloudsql/$CLOUD_SQL_INSTANCE"
fi
case "$CLUSTERBOT_DATABASE_URL" in
  postgresql+asyncpg://*) ;;
  *) fail "CLUSTERBOT_DATABASE_URL must be postgresql+asyncpg://...: an App Engine instance keeps no disk" ;;
esac
case "$CLUSTERBOT_DATABASE_URL" in
  *://*:*@*) fail "CLUSTERBOT_DATABASE_URL holds a password: keep it in Secret Manager (DATABASE_PASSWORD_REF)" ;;
esac

export PROJECT CLUSTERBOT_TARGETS CLUSTERBOT_ALERT_CHANNEL CLUSTERBOT_DATABASE_URL
export SERVICE="${SERVICE:-clusterbot}"
export SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-clusterbot@$PROJECT.iam.gserviceaccount.com}"
export CLOUD_SQL_INSTANCE="${CLOUD_SQL_INSTANCE:-}"
export BOT_TOKEN_REF="${BOT_TOKEN_REF:-sm://$PROJECT/slack-bot-token}"
export SIGNING_SECRET_REF="${SIGNING_SECRET_REF:-sm://$PROJECT/slack-signing-secret}"
export DATABASE_PASSWORD_REF="${DATABASE_PASSWORD_REF:-sm://$PROJECT/clusterbot-db-password}"
for name in BOT_TOKEN_REF SIGNING_SECRET_REF DATABASE_PASSWORD_REF; do
  case "${!name}" in
    sm://*) ;;
    *) fail "$name must be a Secret Manager reference (sm://PROJECT/SECRET), never a value" ;;
  esac
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
placeholders='${SERVICE} ${SERVICE_ACCOUNT} ${CLOUD_SQL_INSTANCE} ${BOT_TOKEN_REF}
${SIGNING_SECRET_REF} ${DATABASE_PASSWORD_REF} ${CLUSTERBOT_DATABASE_URL} ${CLUSTERBOT_TARGETS}
${CLUSTERBOT_ALERT_CHANNEL}'
envsubst "$placeholders" < "$root/app.yaml" > "$stage/app.yaml"
[ -n "$CLOUD_SQL_INSTANCE" ] || sed -i '/^beta_settings:/,/cloud_sql_instances:/d' "$stage/app.yaml"
[ -n "${1:-}" ] || sed -i '/CLUSTERBOT_POLICY_FILE/d' "$stage/app.yaml"
if [ -n "${DRY_RUN:-}" ]; then
  cat "$stage/app.yaml"
  exit 0
fi

if [ "$SERVICE" != default ] &&
  ! gcloud app services list --project "$PROJECT" --format 'value(id)' 2>/dev/null | grep -qx default; then
  fail "this App Engine app has no default service yet, and the first one deployed must be: \
run again with SERVICE=default (docs/DEPLOY.md, step 8a)"
fi
cp -r "$root/bot" "$root/handlers" "$root/pyproject.toml" "$root/README.md" "$root/Dockerfile" \
  "$root/.dockerignore" "$stage/"
rm -rf "$stage/bot/sandbox"  # the local stand-ins are for tests and the demo, never deployed
if [ -n "${1:-}" ]; then
  # the policy file is baked into the image at the path app.yaml names
  printf 'COPY --chown=clusterbot:clusterbot %s /var/lib/clusterbot/policy.toml\n' policy.toml >> "$stage/Dockerfile"
  cp "$1" "$stage/policy.toml"
fi
(cd "$stage" && gcloud app deploy app.yaml --project "$PROJECT" --quiet)
