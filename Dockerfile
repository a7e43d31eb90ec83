# pyexec in a container. Build: docker build -t pyexec .
# Run (cgroup v2 host; docs/deploy.md explains every option):
#   docker run -d --name pyexec -p 8080:8080 \
#     --cgroupns=private --cap-add SYS_ADMIN --cap-add NET_ADMIN \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -e PYEXEC_API_KEYS=admin:change-me -v pyexec-data:/var/lib/pyexec pyexec

# --- build: a static binary ------------------------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/pyexec ./cmd/pyexec

# --- run: Debian with the interpreter the jails run ------------------------
FROM debian:bookworm-slim
# The server fetches the pinned uv and ruff into the data volume at first
# start (PYEXEC_PROVISION_TOOLS); python3-venv and pip build dependency
# environments if uv cannot be fetched; ca-certificates reach the index.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/pyexec /usr/local/bin/pyexec
COPY deploy/entrypoint.sh /usr/local/bin/pyexec-entrypoint
# The server runs as root inside the container: it builds the jails, and
# every payload runs as uid 65534 without capabilities.
ENV PYEXEC_HOST=0.0.0.0 \
    PYEXEC_PORT=8080 \
    PYEXEC_DATA_DIR=/var/lib/pyexec \
    PYEXEC_ENV_DIR=/var/lib/pyexec/envs
VOLUME /var/lib/pyexec
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pyexec-entrypoint"]
CMD ["serve"]
