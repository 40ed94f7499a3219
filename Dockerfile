# gpujobd image: build with the CUDA toolkit, run on the CUDA runtime base.
# The binary also runs without a GPU (it logs that and uses the CPU).
ARG CUDA_VERSION=12.6.3
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev libpq-dev \
      libssl-dev libcmocka-dev libfftw3-dev libopenblas-dev libpng-dev zlib1g-dev libexpat1-dev \
      libturbojpeg0-dev libopenjp2-7-dev libcharls-dev libprotobuf-c-dev protobuf-c-compiler python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup /build -Dcuda=enabled -Dbuildtype=release && ninja -C /build service/gpujobd

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12t64 libjansson4 libpq5 libssl3t64 libfftw3-single3 libopenblas0 libpng16-16t64 \
      zlib1g libexpat1 libturbojpeg libopenjp2-7 libcharls2 libprotobuf-c1 ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 --home /var/lib/gpujobd gpujobd
COPY --from=build /build/service/gpujobd /usr/local/bin/gpujobd
USER 10001
ENV GPUJOBD_DATA_DIR=/var/lib/gpujobd GPUJOBD_LISTEN=0.0.0.0:8443
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/gpujobd"]
CMD ["serve"]
