#!/usr/bin/env bash
# Builds the project's images with no image registry and no network during the build:
#   1. a base image made locally with debootstrap (Debian bookworm minbase with Debian's
#      Python 3.11 and Java 17), imported as local/timerstore-base:bookworm;
#   2. a wheelhouse of every runtime dependency pinned in requirements.lock, made on the
#      host with `pip wheel` (PyPI reachable from the host), hard-linked into the build
#      context at docker/wheelhouse/ (ignored by git);
#   3. timerstore:latest and timerstore-spark-worker:latest through docker-compose with
#      docker-compose.offline.yml, which passes the local base as BASE_IMAGE/SPARK_IMAGE.
# The root filesystem, the base image and the wheelhouse are cached between runs in
# $TIMERSTORE_DOCKER_CACHE (default /var/cache/timerstore-docker, never in git): a base image
# is kept while its recipe is unchanged, a wheelhouse while requirements.lock and the
# dependency list of pyproject.toml are. Runs on one machine take turns (a lock in the
# cache). Needs root (debootstrap), docker, docker-compose, debootstrap.
# With TIMERSTORE_OFFLINE_NO_FETCH=1 (the docker test sets it) nothing is downloaded: a
# cold cache is an error that says to run `make images` first (`make test` does, before
# pytest), so a test's traffic stays on the machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TIMERSTORE_DOCKER_CACHE:-/var/cache/timerstore-docker}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_IMAGE=local/timerstore-base:bookworm
# Debian's Python 3.11 (requires-python) and Java 17 (the PySpark driver and Spark itself);
# python3-distutils provides python3.11-distutils, which debootstrap cannot resolve by itself;
# procps gives Spark's scripts `ps`.
PACKAGES=python3.11,python3.11-venv,python3-distutils,openjdk-17-jre-headless,procps
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}  # has pip; `make` creates it

log() { printf '[build-offline %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

refuse_fetch() {
    if [[ ${TIMERSTORE_OFFLINE_NO_FETCH:-} == 1 ]]; then
        log "the $1 is not cached in $CACHE and TIMERSTORE_OFFLINE_NO_FETCH=1: run \`make images\` first"
        exit 1
    fi
}

# A failed debootstrap may leave /proc or /sys mounted inside: unmount before deleting.
remove_rootfs() {
    local mnt
    for mnt in $(findmnt -rn -o TARGET | grep -F "$1/" | sort -r || true); do
        umount -l "$mnt" || true
    done
    rm -rf "$1"
}

base_image() {
    local recipe label
    recipe=$(printf '%s\n' bookworm minbase "$PACKAGES" | sha256sum | cut -c1-16)
    label=$(docker image inspect -f '{{index .Config.Labels "timerstore.recipe"}}' \
        "$BASE_IMAGE" 2>/dev/null || true)
    if [[ $label == "$recipe" ]]; then
        log "base image $BASE_IMAGE is current ($recipe)"
        return
    fi
    local tarball=$CACHE/rootfs-$recipe.tar
    if [[ ! -s $tarball ]]; then
        refuse_fetch "base root filesystem"
        local rootfs=$CACHE/rootfs-$recipe
        remove_rootfs "$rootfs"
        mkdir -p "$CACHE"
        log "debootstrap bookworm minbase + $PACKAGES from $MIRROR"
        debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR" \
            >"$CACHE/debootstrap.log" 2>&1 || {
            tail -20 "$CACHE/debootstrap.log" >&2
            exit 1
        }
        chroot "$rootfs" apt-get clean
        rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
        tar -C "$rootfs" -cf "$tarball.part" .
        mv "$tarball.part" "$tarball"
        remove_rootfs "$rootfs"
    fi
    log "docker import $tarball -> $BASE_IMAGE"
    docker import --change "LABEL timerstore.recipe=$recipe" \
        --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
}

wheelhouse() {
    local key dir reqs
    reqs=$(mktemp)
    # The runtime dependencies of pyproject.toml, at the versions requirements.lock pins.
    "$PYTHON" -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"], sep="\n")' \
        "$ROOT/pyproject.toml" >"$reqs"
    key=$(cat "$reqs" "$ROOT/requirements.lock" | sha256sum | cut -c1-16)
    dir=$CACHE/wheelhouse-$key
    if [[ ! -f $dir/.complete ]]; then
        refuse_fetch wheelhouse
        rm -rf "$dir"
        mkdir -p "$dir"
        log "pip wheel: runtime dependencies pinned by requirements.lock -> $dir"
        "$PYTHON" -m pip wheel -q -r "$reqs" -c "$ROOT/requirements.lock" -w "$dir" \
            >"$CACHE/pip-wheel.log" 2>&1 || {
            tail -20 "$CACHE/pip-wheel.log" >&2
            exit 1
        }
        # The project's build backend (pyproject [build-system]), for `pip install --no-index`.
        "$PYTHON" -m pip download -q --no-deps -d "$dir" "setuptools>=68,<81" wheel
        touch "$dir/.complete"
    fi
    rm -f "$reqs"
    log "wheelhouse $dir ($(du -sh "$dir" | cut -f1)) -> docker/wheelhouse"
    rm -rf "$ROOT/docker/wheelhouse"
    cp -al "$dir" "$ROOT/docker/wheelhouse" 2>/dev/null || cp -a "$dir" "$ROOT/docker/wheelhouse"
    rm -f "$ROOT/docker/wheelhouse/.complete"
}

images() {
    log "docker-compose build (offline: BASE_IMAGE=$BASE_IMAGE)"
    cd "$ROOT"
    docker-compose -f docker-compose.yml -f docker-compose.offline.yml build timerstore
    docker-compose -f docker-compose.yml -f docker-compose.offline.yml build spark-worker
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

case ${1:-all} in
base) base_image ;;
wheelhouse) wheelhouse ;;
images) images ;;
all) base_image && wheelhouse && images ;;
*) echo "usage: $0 [all|base|wheelhouse|images]" >&2 && exit 2 ;;
esac
log done
