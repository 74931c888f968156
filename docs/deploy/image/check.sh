#!/usr/bin/env bash
# Build the Dockerfile's image on this machine and run it: /healthz and /readyz must answer.
# For a machine with no Docker daemon and no access to Docker Hub: Debian's buildah and
# podman, vfs storage, chroot isolation, and, since python:3.11-slim cannot be pulled, a base
# of the same name made from Debian bookworm's own packages with debootstrap (Python 3.11,
# `python` on the PATH, pip allowed to install as the official image allows). Needs root.
#
#   sudo docs/deploy/image/check.sh        # or: make image-check
#
# Where Docker runs, the same check is: docker build -t clusterbot . && docker run ...
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${WORK:-/var/tmp/clusterbot-image}
port=${PORT:-18080}
store=(--storage-driver vfs)
say() { printf '\n== %s\n' "$*"; }

for tool in buildah podman debootstrap curl; do
  command -v $tool > /dev/null || { echo "needs $tool: apt-get install buildah podman debootstrap curl" >&2; exit 2; }
done
mkdir -p "$work"

if ! podman "${store[@]}" image exists docker.io/library/python:3.11-slim; then
  say "a local python:3.11-slim from Debian bookworm's packages"
  base=$work/rootfs
  [ -x "$base/usr/bin/python3" ] ||
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      bookworm "$base" http://deb.debian.org/debian
  ln -sf /usr/bin/python3 "$base/usr/local/bin/python"
  rm -f "$base"/usr/lib/python3*/EXTERNALLY-MANAGED  # as in the official image: pip installs
  # the certificates this host trusts, so that a TLS proxy it reaches PyPI through is trusted
  # inside the build as well (Debian's pip reads the system bundle)
  cp /etc/ssl/certs/ca-certificates.crt "$base/etc/ssl/certs/ca-certificates.crt"
  tar -C "$base" -c . | podman "${store[@]}" import - docker.io/library/python:3.11-slim
fi

say "build (buildah, chroot isolation, no pulls)"
# the Docker format keeps HEALTHCHECK, which the OCI format has no field for
buildah "${store[@]}" build --format docker --isolation chroot --pull=never \
  -t localhost/clusterbot:check "$root"

say "run it: clusterbot serve on port $port, its database a SQLite file in the image"
ctr=$(buildah "${store[@]}" from --pull=never localhost/clusterbot:check)
cleanup() { buildah "${store[@]}" rm "$ctr" > /dev/null 2>&1 || true; }
trap cleanup EXIT
buildah "${store[@]}" run --isolation chroot \
  --env PORT="$port" --env CLUSTERBOT_HOST=127.0.0.1 --env SLACK_BOT_TOKEN=xoxb-image-check \
  --env SLACK_SIGNING_SECRET=image-check --env CLUSTERBOT_TARGETS=image-check/us-central1 \
  --env CLUSTERBOT_VERTEX_STATIC_TOKEN=image-check --env CLUSTERBOT_VERTEX_API_URL=http://127.0.0.1:9 \
  "$ctr" -- clusterbot serve > "$work/serve.log" 2>&1 &
served=$!
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break; sleep 0.2; done
health=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/healthz")
ready=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/readyz")
user=$(buildah "${store[@]}" run --isolation chroot "$ctr" -- id -un)
# the image's own HEALTHCHECK command, as Docker would run it (the CMD form's words)
mapfile -t words < <(buildah "${store[@]}" inspect --type image localhost/clusterbot:check |
  python3 -c 'import json, sys; test = json.load(sys.stdin)["Docker"]["config"]["Healthcheck"]["Test"]
print(*(test[1:] if test[0] == "CMD" else []), sep="\n")')
healthcheck=failed
[ "${#words[@]}" -gt 0 ] &&
  buildah "${store[@]}" run --isolation chroot --env PORT="$port" "$ctr" -- "${words[@]}" &&
  healthcheck=passed
stand_ins=$(buildah "${store[@]}" run --isolation chroot "$ctr" -- clusterbot demo 2>&1 || true)
kill "$served" 2> /dev/null || true
wait "$served" 2> /dev/null || true
echo "/healthz: $health"
echo "/readyz:  $ready"
echo "user:     $user"
echo "HEALTHCHECK: $healthcheck"
echo "demo:     $stand_ins"
buildah "${store[@]}" images --format '{{.Name}}:{{.Tag}} {{.Size}}' localhost/clusterbot:check
case "$health" in *' 200') ;; *) echo "healthz failed; serve's log:" >&2; cat "$work/serve.log" >&2; exit 1 ;; esac
case "$ready" in *'"database": true'*'"scheduler": true'*) ;; *) echo "readyz failed" >&2; cat "$work/serve.log" >&2; exit 1 ;; esac
[ "$user" = clusterbot ] || { echo "runs as $user, not clusterbot" >&2; exit 1; }
[ "$healthcheck" = passed ] || { echo "the image's HEALTHCHECK did not pass" >&2; exit 1; }
echo "image check passed"
