#!/bin/sh
# image.sh: build heureka:latest without pulling anything (`make image`).
#
# The Dockerfile's build stage needs the golang base image from a registry.
# This builds the same static binary with the Go toolchain on the host
# instead and feeds it, with the same small root filesystem (passwd, group,
# /data, /tmp), to the Dockerfile's own final stage (FROM scratch onwards),
# in a generated build context holding only those files. The image is the
# one `docker build .` makes, where a registry is reachable.
set -eu

tag=${IMAGE:-heureka:latest}
root=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

(cd "$root" && CGO_ENABLED=0 GOOS=linux ${GO:-go} build -trimpath -ldflags="-s -w" -o "$ctx/heureka" ./cmd/heureka)
mkdir -p "$ctx/rootfs/data" "$ctx/rootfs/secret" "$ctx/rootfs/etc" "$ctx/rootfs/tmp"
chmod 700 "$ctx/rootfs/secret"
echo 'heureka:x:10001:10001:heureka:/data:/sbin/nologin' >"$ctx/rootfs/etc/passwd"
echo 'heureka:x:10001:' >"$ctx/rootfs/etc/group"
chmod 1777 "$ctx/rootfs/tmp"
# A context COPY makes every file root's; ADD of a tar keeps the owners in
# it, so /data and /secret go to the heureka user as the build stage's
# chown does (a named volume mounted there starts with that owner).
tar -cf "$ctx/rootfs.tar" --numeric-owner --owner=0 --group=0 -C "$ctx/rootfs" etc tmp
tar -rf "$ctx/rootfs.tar" --numeric-owner --owner=10001 --group=10001 -C "$ctx/rootfs" data secret
rm -rf "$ctx/rootfs"

# The final stage, with its two COPY --from=build lines taken from the
# context instead.
awk '
	/^FROM scratch/ { on = 1 }
	!on { next }
	$0 == "COPY --from=build /out/rootfs/ /" { print "ADD rootfs.tar /"; n++; next }
	$0 == "COPY --from=build /out/heureka /usr/local/bin/heureka" { print "COPY heureka /usr/local/bin/heureka"; n++; next }
	/--from=/ { print "image.sh: unexpected line in the final stage: " $0 > "/dev/stderr"; exit 1 }
	{ print }
	END { if (n != 2) { print "image.sh: the Dockerfile final stage changed; update scripts/image.sh" > "/dev/stderr"; exit 1 } }
' "$root/Dockerfile" >"$ctx/Dockerfile"

# The classic builder: it needs no buildx plugin and pulls nothing for FROM scratch.
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >/dev/null
echo "built $tag"
