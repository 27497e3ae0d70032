#!/usr/bin/env bash
# fetch-debs.sh - gather the Debian 12 packages tiergnn builds with into one folder, on a
# machine where apt works, for bench/gpu/run.sh on a GPU machine without a package mirror
# (run.sh --debs DIR unpacks them with dpkg -x; nothing is installed there).
#
#   bench/gpu/fetch-debs.sh [--mpi] [DIR]   # default bench/gpu/debs: untracked, so it travels
#                                           # with the working tree; never commit it
#
# --mpi adds OpenMPI (mpirun, libmpi and mpi.h) and the libraries its plugins load, for
# bench/gpu/dist.sh; dist.sh names any library still missing on the machine (ldd).
#
# Takes each .deb from /var/cache/apt/archives when it is there, else `apt-get download`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mpi=0
if [ "${1:-}" = --mpi ]; then
  mpi=1
  shift
fi
out=${1:-$here/debs}
# the -dev packages tiergnn's CMakeLists.txt finds, and the runtime libraries they link
PKGS="liburing2 liburing-dev libopenblas0 libopenblas0-pthread libopenblas-dev
  libopenblas-pthread-dev libgfortran5 libquadmath0 libmetis5 libgklib0 libmetis-dev zlib1g
  zlib1g-dev"
# OpenMPI 4.1: the programs, the library and its header, and the runtime libraries of its
# launcher and transports (PMIx, hwloc, libevent, libfabric, UCX, verbs, PSM) that a minimal
# Debian 12 lacks
[ $mpi = 1 ] && PKGS+=" openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1
  libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libmunge2 libnuma1 libpciaccess0
  libxnvctrl0 libxml2 libicu72 libltdl7"
mkdir -p "$out"
cd "$out"
for p in $PKGS; do
  # a package this release does not have (libgklib0 before METIS split it out) is skipped
  v=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$v" ] || [ "$v" = "(none)" ]; then
    echo "fetch-debs: $p: not in this release, skipped" >&2
    continue
  fi
  vf=${v//:/%3a}
  got=$(ls /var/cache/apt/archives/"${p}_${vf}"_*.deb 2>/dev/null | head -n 1 || true)
  if [ -n "$got" ]; then
    cp -f "$got" .
  else
    apt-get download "$p=$v" >/dev/null
  fi
  echo "fetch-debs: $(ls "${p}_${vf}"_*.deb)"
done
echo "fetch-debs: $(ls ./*.deb | wc -l) packages in $out"
