#!/bin/bash
# build.sh - compile tm_send, the rxe-side client of "softnic tm_pingpong", on the host.
#
# The guest runs binaries of Debian 12 packages against the libraries of the same packages
# (guest/build.sh); tm_send is built here against the host's libibverbs-dev, which is the
# same Debian release, and needs only libibverbs.so.1 and libc, both already in the guest
# (ibverbs-utils links them). So it can run in the guest from the 9p share without a guest
# rebuild: test/interop/run builds it, the test copies it into the guest's 9p share
# ($INTEROP_STATE/guests/<guest>/share/) and the guest runs it as /host/tm_send.
#
# Usage: build.sh OUTPUT      (installs gcc, libc6-dev and libibverbs-dev when missing)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$HERE/../lib.sh"

[ $# = 1 ] || { echo "usage: $0 OUTPUT" >&2; exit 2; }
# apt_install skips Recommends, and gcc only recommends libc6-dev (the C headers and crt
# files): a fresh Debian 12 machine needs it asked for by name
want=()
command -v gcc >/dev/null 2>&1 || want+=(gcc)
[ -f /usr/include/stdio.h ] || want+=(libc6-dev)
[ -f /usr/include/infiniband/verbs.h ] || want+=(libibverbs-dev)
if ((${#want[@]})); then
	need_root
	apt_install "${want[@]}"
fi
gcc -O2 -Wall -Wextra -Werror -o "$1" "$HERE/tm_send.c" -libverbs
