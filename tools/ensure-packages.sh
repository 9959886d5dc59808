#!/usr/bin/env bash
# Installs the Debian packages the test suite runs for real (`make test` runs it, before
# pytest): Chromium for the browser tests, redis-server for the Redis Streams sink and the
# Redis peer of the benchmark, PostgreSQL 15 for the PostgreSQL peer, curl for the
# README's examples (tests/docs). Only
# what is missing, through apt; idempotent and quiet. On failure it prints one line with
# the reason and exits non-zero: the tests that need the package then say it is missing
# (and fail under CI=true). Tests never install anything themselves: their network is
# 127.0.0.1 only.
set -uo pipefail

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[[ -x /usr/lib/postgresql/15/bin/initdb ]] || missing+=(postgresql-15)
((${#missing[@]})) || exit 0
out=$(
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq 2>&1 &&
        apt-get install -y -qq "${missing[@]}" 2>&1 </dev/null
) || {
    echo "ensure-packages: apt-get install ${missing[*]} failed: $(tail -3 <<<"$out")" >&2
    exit 1
}
