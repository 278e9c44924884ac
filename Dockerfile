# heureka image: a static binary on an empty base, run as a non-root user.
#
#   docker build -t heureka:latest .
#   docker run -p 8761:8761 -v heureka-data:/data heureka:latest
#
# The binary is the only thing in the image; it is also the healthcheck
# (`heureka status` exits non-zero when the node does not answer) and the
# operator CLI (`docker compose exec heureka1 heureka members`).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/heureka ./cmd/heureka \
 && mkdir -p /out/rootfs/data /out/rootfs/secret /out/rootfs/etc /out/rootfs/tmp \
 && echo 'heureka:x:10001:10001:heureka:/data:/sbin/nologin' > /out/rootfs/etc/passwd \
 && echo 'heureka:x:10001:' > /out/rootfs/etc/group \
 && chown 10001:10001 /out/rootfs/data /out/rootfs/secret \
 && chmod 700 /out/rootfs/secret \
 && chmod 1777 /out/rootfs/tmp

FROM scratch
COPY --from=build /out/rootfs/ /
COPY --from=build /out/heureka /usr/local/bin/heureka
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# 8761: HTTP (Eureka API, operator API, /metrics, dashboard); 8762: Raft.
EXPOSE 8761 8762
# Defaults for a single node; a cluster sets HEUREKA_NODE_ID, HEUREKA_RAFT_ADDR
# and HEUREKA_INITIAL_CLUSTER or HEUREKA_JOIN (see docker-compose.yml). The
# node id is fixed so that a recreated container finds itself in its data.
# HEUREKA_ADDR is where the operator commands look for the node.
ENV HEUREKA_NODE_ID=heureka \
    HEUREKA_HTTP_ADDR=0.0.0.0:8761 \
    HEUREKA_DATA_DIR=/data \
    HEUREKA_ADDR=127.0.0.1:8761
HEALTHCHECK --interval=5s --timeout=3s --start-period=15s --retries=5 \
  CMD ["heureka", "status", "--addr", "127.0.0.1:8761", "--timeout", "2s"]
ENTRYPOINT ["heureka"]
CMD ["serve"]
