#!/usr/bin/env bash
# Makes the machine ready for the docker test (`make test` runs it): installs docker.io,
# docker-compose (Compose v1) and debootstrap through apt when missing, and starts dockerd
# when no daemon answers. Idempotent and quiet; prints one line and exits non-zero, with
# the reason, when something cannot be done (the test then says why and fails in CI).
set -uo pipefail

LOG=${TIMERSTORE_DOCKER_LOG:-/var/log/timerstore-dockerd.log}
missing=()
command -v dockerd >/dev/null 2>&1 || [[ -x /usr/sbin/dockerd ]] || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || [[ -x /usr/sbin/debootstrap ]] || missing+=(debootstrap)
if ((${#missing[@]})); then
    out=$(
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq 2>&1 &&
            apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1 </dev/null
    ) || {
        echo "ensure-docker: apt-get install ${missing[*]} failed: $(tail -3 <<<"$out")" >&2
        exit 1
    }
fi

if ! docker info >/dev/null 2>&1; then
    dockerd=$(command -v dockerd || echo /usr/sbin/dockerd)
    # A system daemon, started the way an init system would: it outlives this script.
    setsid nohup "$dockerd" >>"$LOG" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || break # it gave up: the log says why
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        echo "ensure-docker: dockerd did not start; last lines of $LOG:" >&2
        tail -5 "$LOG" >&2
        exit 1
    fi
fi
