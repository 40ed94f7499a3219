# gpujobd image: built on NVIDIA's CUDA + cuDNN development image, run on the CUDA + cuDNN
# runtime image of the same version (Ubuntu 24.04). Tags are VERSION-cudaCUDA_VERSION, e.g.
# 0.1.0-cuda13.0.2, never `latest`; deploy/docker/build.sh builds and pushes with that tag.
#
#   deploy/docker/build.sh --push registry.example.com/gpujobd
#   docker run --gpus all -p 8443:8443 registry.example.com/gpujobd:0.1.0-cuda13.0.2
#
# The second command serves https://HOST:8443 with the embedded defaults: a private PostgreSQL,
# a self-signed certificate and an admin key, all in the volume at /var/lib/gpujobd (the key is
# logged once and kept in /var/lib/gpujobd/admin.key). Without a GPU the binary uses the CPU.
# Stop it with `docker stop -t 60` so that running jobs get their grace period.

ARG CUDA_VERSION=13.0.2

FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-ubuntu24.04 AS build
# Device code for A100 (80), A10/A40/RTX 30 (86), L4/L40/RTX 40 (89), H100/H200 (90), and PTX of
# 90 that the driver compiles for newer GPUs. cuDNN gives the ONNX runtime its CUDA backend.
ARG MESON_OPTIONS="-Dcuda=enabled -Dbuildtype=release -Dgpu_arch=80,86,89,90 -Dcudnn_dir=/opt/cudnn"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential meson ninja-build pkg-config python3 \
      libmicrohttpd-dev libgnutls28-dev libjansson-dev libpq-dev libssl-dev libcmocka-dev \
      libfftw3-dev libopenblas-dev libdnnl-dev libpng-dev zlib1g-dev libexpat1-dev \
      libturbojpeg0-dev libopenjp2-7-dev libcharls-dev libprotobuf-c-dev protobuf-c-compiler \
      libcurl4-openssl-dev libarchive-dev libgrpc-dev libgcc-13-dev \
 && rm -rf /var/lib/apt/lists/*
COPY deploy/docker/cudnn-prefix.sh deploy/docker/check-binary.sh /usr/local/bin/
RUN cudnn-prefix.sh /opt/cudnn
WORKDIR /src
COPY . .
RUN meson setup /build ${MESON_OPTIONS} \
 && ninja -C /build service/gpujobd \
 && check-binary.sh build /build/service/gpujobd

FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-ubuntu24.04
ARG CUDA_VERSION
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpujobd" \
      org.opencontainers.image.description="GPU compute job service: an HTTPS JSON API, jobs in PostgreSQL, CT reconstruction, BRKGA and ONNX inference on GPUs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-ubuntu24.04" \
      io.gpujobd.cuda-version="${CUDA_VERSION}" \
      io.gpujobd.gpu-arch="sm_80,sm_86,sm_89,sm_90,compute_90"
# The libraries gpujobd links (deploy/docker/ubuntu-noble-packages.txt says which needs what),
# PostgreSQL 16 for the embedded default (Ubuntu's postgresql-common must not create a cluster
# of its own), tini as PID 1 (signals, orphans of the embedded PostgreSQL), curl for HEALTHCHECK.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/gpujobd.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12t64 libgnutls30t64 libjansson4 libpq5 libssl3t64 libfftw3-single3 libopenblas0-pthread libdnnl3 \
      libpng16-16t64 zlib1g libexpat1 libturbojpeg libopenjp2-7 libcharls2 libprotobuf-c1 \
      libgomp1 libstdc++6 libcurl4t64 libarchive13t64 libgrpc29t64 postgresql-16 tini curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gpujobd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/gpujobd --no-create-home \
      --shell /usr/sbin/nologin gpujobd \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/gpujobd
COPY --from=build /build/service/gpujobd /usr/local/bin/gpujobd
COPY --from=build /usr/local/bin/check-binary.sh /usr/local/bin/
COPY deploy/docker/entrypoint.sh /usr/local/bin/gpujobd-entrypoint
COPY deploy/docker/healthcheck.sh /usr/local/bin/gpujobd-healthcheck
RUN check-binary.sh runtime /usr/local/bin/gpujobd
ENV GPUJOBD_DATA_DIR=/var/lib/gpujobd \
    GPUJOBD_LISTEN=0.0.0.0:8443
USER 10001:10001
WORKDIR /var/lib/gpujobd
VOLUME ["/var/lib/gpujobd"]
EXPOSE 8443
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=10s --start-period=180s --retries=3 \
  CMD ["/usr/local/bin/gpujobd-healthcheck"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/gpujobd-entrypoint"]
CMD ["serve"]
