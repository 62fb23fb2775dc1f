#!/usr/bin/env bash
# Proves the README's two commands on a pristine Debian 12 root: a minbase bookworm made with
# mmdebstrap, the working tree copied in (no build/, no .git), then in a chroot
#   1. tools/start-server.sh (installs --serve, builds, serves) until `reprise healthcheck`
#      answers SERVING, then SIGTERM;
#   2. the test command: tools/run-tests.sh (--tests all), or by default its steps with a
#      subset of the suite (--tests unit: install --test, configure, build everything,
#      `ctest --preset release -L unit`, the label of the fast in-process tests).
# Prints how long each step took. Run as root (mmdebstrap, chroot, mounts); needs the network
# to Debian's apt repositories only. Takes 20-60 minutes on two cores.
#   tools/check-clean-install.sh [--tests unit|all] [--dir DIR] [--keep] [--ccache DIR]
#   --dir DIR     make the root in DIR (must not exist; default a fresh folder under /var/tmp)
#   --keep        leave the root in place afterwards (default: removed)
#   --ccache DIR  share a ccache folder with the chroot (faster; the compiled objects come from
#                 DIR, everything else is still pristine). Default: none, everything compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

tests=unit
root=
keep=0
ccache_dir=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tests) tests=$2; shift 2 ;;
    --dir) root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --ccache) ccache_dir=$(realpath "$2"); shift 2 ;;
    *) echo "check-clean-install: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $tests == unit || $tests == all ]] || { echo "check-clean-install: --tests unit|all" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "check-clean-install: run as root (mmdebstrap, chroot)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || {
  echo "check-clean-install: mmdebstrap is not installed; run apt-get update && apt-get install mmdebstrap" >&2
  exit 1
}
if [[ -z $root ]]; then
  root=$(mktemp -d /var/tmp/reprise-clean-install.XXXXXX)
  rmdir "$root"
fi
[[ ! -e $root ]] || { echo "check-clean-install: $root exists" >&2; exit 1; }

overall=$(date +%s)
step_start=0
step() { step_start=$(date +%s); echo "=== $1"; }
done_step() { echo "=== $1: $(( $(date +%s) - step_start )) s"; }

mounted=()
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  local i
  for (( i=${#mounted[@]}-1; i>=0; i-- )); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [[ $keep == 0 && -d $root ]]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A command in the chroot, with a clean environment; exec_in_root replaces the calling shell.
exec_in_root() { exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 TERM=dumb ${ccache_dir:+CCACHE_DIR=/ccache} /bin/bash -o pipefail -c "$1"; }
in_root() { (exec_in_root "$1"); }

step "mmdebstrap --variant=minbase bookworm $root"
mmdebstrap --quiet --variant=minbase bookworm "$root" http://deb.debian.org/debian \
  "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main"
done_step "mmdebstrap"

step "copy the tree into $root/src (git ls-files: no build/, no .git)"
mkdir "$root/src"
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$root/src"
echo "$(find "$root/src" -type f | wc -l) files, $(du -sh "$root/src" | cut -f1)"
for d in proc sys dev dev/pts; do
  mount --bind "/$d" "$root/$d"
  mounted+=("$root/$d")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
# As in Debian's container images: packages' maintainer scripts start no services (Prometheus).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
if [[ -n $ccache_dir ]]; then
  mkdir -p "$root/ccache"
  mount --bind "$ccache_dir" "$root/ccache"
  mounted+=("$root/ccache")
fi
done_step "copy"

# 1. The first README command: builds and serves; polled with the client it builds.
read -r grpc_port metrics_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
step "tools/start-server.sh --grpc-port $grpc_port --http-port 0 --metrics-port $metrics_port"
(exec_in_root "cd /src && exec tools/start-server.sh --grpc-port $grpc_port \
  --http-port 0 --metrics-port $metrics_port") >"$root/start-server.log" 2>&1 &
server_pid=$!
healthy=0
while kill -0 "$server_pid" 2>/dev/null; do
  if [[ -x $root/src/build/release/tools/reprise ]] &&
     in_root "/src/build/release/tools/reprise --addr 127.0.0.1:$grpc_port healthcheck" \
       >/dev/null 2>&1; then
    healthy=1
    break
  fi
  sleep 5
done
if [[ $healthy == 0 ]]; then
  tail -n 40 "$root/start-server.log"
  echo "check-clean-install: tools/start-server.sh exited before answering a health check" >&2
  exit 1
fi
grep -E "^install-deps" "$root/start-server.log" || true
in_root "/src/build/release/tools/reprise --addr 127.0.0.1:$grpc_port health"
done_step "start-server.sh until reprise healthcheck passed"
kill -TERM "$server_pid"
wait "$server_pid" && echo "reprise-server exited 0 after SIGTERM" ||
  { echo "check-clean-install: reprise-server exited $? after SIGTERM" >&2; exit 1; }
server_pid=

# 2. The second README command (or its steps with the unit-labelled tests).
if [[ $tests == all ]]; then
  step "tools/run-tests.sh"
  in_root "cd /src && tools/run-tests.sh 2>&1 | tail -n 40"
  done_step "run-tests.sh"
else
  step "tools/install-deps.sh --test"
  in_root "cd /src && tools/install-deps.sh --test"
  done_step "install-deps.sh --test"
  step "cmake --preset release -DREPRISE_BUILD_TESTS=ON && cmake --build --preset release"
  in_root "cd /src && export CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 &&
    cmake --preset release -DREPRISE_BUILD_TESTS=ON >/dev/null &&
    cmake --build --preset release | tail -n 3"
  done_step "configure + build"
  step "ctest --preset release -L unit"
  in_root "cd /src && ctest --preset release -L unit 2>&1 | tail -n 15"
  done_step "ctest -L unit"
fi
echo "check-clean-install: passed in $(( $(date +%s) - overall )) s"
