#!/bin/sh
# Installs everything kvstore builds and tests with, from Debian 12's packages. The CUDA
# toolkit is optional and not a Debian package: when /usr/local/cuda/bin/nvcc exists the
# build also compiles the GPU paths. openssh-server is only run by the ssh launcher test,
# as a private sshd on a loopback port with its own keys. python3-matplotlib draws the main
# job's loss and accuracy curves (scripts/run-main.sh).
set -eu
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config git ca-certificates \
  libzmq3-dev cppzmq-dev libsodium-dev \
  swig openjdk-17-jdk-headless scala clojure \
  perl pdl \
  python3 python3-dev python3-numpy python3-pytest python3-setuptools python3-pip python3-sklearn \
  python3-matplotlib \
  openssh-client openssh-server \
  >/dev/null
echo "setup-debian: packages installed"
