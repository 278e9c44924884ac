#!/bin/sh
# docker-deps.sh: make sure a Docker engine and docker-compose are usable for
# the container tests (e2e/compose). Called by `make deps`.
#
# As root it installs Debian's docker.io and docker-compose when missing and
# starts dockerd in the background when no daemon answers, waiting (bounded)
# for its socket (30 s). It first tries the default storage driver (overlay2)
# and falls back to vfs, and it retries without iptables when the daemon
# cannot program the firewall (some VMs and nested containers); the log is
# /var/log/heureka-dockerd.log. Not as root it only
# reports what is missing: the container tests then skip with a message.
set -u

log() { echo "make deps (docker): $*"; }

have() { command -v "$1" >/dev/null 2>&1; }

daemon_up() { docker info >/dev/null 2>&1; }

if [ "$(id -u)" != 0 ]; then
	if ! daemon_up; then log "no Docker daemon and not root: container tests will skip"; fi
	exit 0
fi

pkgs=""
have dockerd || pkgs="$pkgs docker.io"
have docker-compose || pkgs="$pkgs docker-compose"
if [ -n "$pkgs" ]; then
	log "installing$pkgs"
	apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $pkgs >/dev/null ||
		{ log "apt-get install$pkgs failed"; exit 1; }
fi

daemon_up && exit 0

# start_dockerd ARGS...: start dockerd with ARGS and wait up to 30 s for it.
start_dockerd() {
	log "starting dockerd $*"
	nohup dockerd "$@" >/var/log/heureka-dockerd.log 2>&1 &
	pid=$!
	i=0
	while [ $i -lt 60 ]; do
		if daemon_up; then log "dockerd running (pid $pid)"; return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then break; fi
		sleep 0.5
		i=$((i + 1))
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	log "dockerd $* did not come up; last log lines:"
	tail -n 5 /var/log/heureka-dockerd.log
	return 1
}

# The defaults first (overlay2, iptables), then the fallbacks for kernels or
# nested setups without overlay mounts or netfilter.
for args in "" "--storage-driver=vfs" "--iptables=false" "--storage-driver=vfs --iptables=false"; do
	# shellcheck disable=SC2086
	start_dockerd $args && exit 0
done
log "could not start dockerd: container tests will skip (and fail under make test)"
exit 1
