#!/bin/bash
# build.sh - compile tm_send, the rxe-side client of "softnic tm_pingpong", on the host.
#
# The guest runs binaries of Debian 12 packages against the libraries of the same packages
# (guest/build.sh); tm_send is built here against the host's libibverbs-dev, which is the
# same Debian release, and needs only libibverbs.so.1 and libc, both already in the guest
# (ibverbs-utils links them). So it can run in the guest from the 9p share without a guest
# rebuild: put it in $INTEROP_STATE/<guest>/share/ and run /host/tm_send there.
#
# Usage: build.sh OUTPUT      (installs gcc and libibverbs-dev when missing)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$HERE/../lib.sh"

[ $# = 1 ] || { echo "usage: $0 OUTPUT" >&2; exit 2; }
ensure_cmds gcc:gcc
[ -f /usr/include/infiniband/verbs.h ] || { need_root; apt_install libibverbs-dev; }
gcc -O2 -Wall -Wextra -Werror -o "$1" "$HERE/tm_send.c" -libverbs
