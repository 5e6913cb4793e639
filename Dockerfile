# rpe-train on a CUDA machine. The image runs the same scripts/ install and build steps
# that CI exercises; the PyPI torch==2.11.0 wheel is a CUDA 13.0 build, so the binary
# uses the GPU when one is passed to the container.
#   docker build -t rpe-train .
#   docker run --gpus all -v $PWD/runs:/rpe-train/runs rpe-train \
#       pretrain --config configs/pretrain/tiny_m4.yaml
FROM nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ccache pkg-config git python3 python3-venv python3-pip \
      libsentencepiece-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev \
      libgtest-dev libutf8proc-dev libgloo-dev zlib1g-dev && rm -rf /var/lib/apt/lists/*

WORKDIR /rpe-train
COPY . .
RUN ./scripts/install_deps.sh && ./scripts/build.sh
ENTRYPOINT ["/rpe-train/build/rpe-train"]
CMD ["--version"]
