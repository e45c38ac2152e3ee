#!/bin/bash
# build.sh - build (once) the Soft-RoCE peer guest of softnic's interop test bed.
#
# Output, cached in $INTEROP_CACHE/guest (default /var/cache/softnic-interop/guest):
#   vmlinuz      Debian's own linux-image-amd64 kernel (6.1.x, ships rdma_rxe as a module)
#   vmlinux      the same kernel as an uncompressed ELF (booted via PVH: much faster under TCG)
#   initrd.img   an uncompressed initramfs assembled here: busybox-static, the kernel modules for
#                virtio-net, 9p, rdma_rxe and netem/ifb (with their dependencies), and rdma-core's
#                userspace (libibverbs + librxe, ibverbs-utils, perftest, librdmacm,
#                rdmacm-utils, iproute2's `rdma` and `tc`) with every shared library they need
#   manifest.txt what went in (package versions, modules, binaries)
#
# Packages are fetched with `apt-get download` and unpacked with `dpkg -x` into the cache;
# nothing is installed on the host except missing host tools.
#
# Usage: build.sh [--force]     (without --force a complete, up-to-date build is reused)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$HERE/../lib.sh"

FORCE=0
case "${1:-}" in
	--force) FORCE=1 ;;
	"") ;;
	*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac
need_root

# Guest userspace: top-level packages. Their shared-library dependencies are resolved below.
TOP_PKGS="busybox-static libibverbs1 ibverbs-providers ibverbs-utils perftest librdmacm1 rdmacm-utils iproute2"
# Kernel modules loaded in the guest, in this order (dependencies are added before each).
# sch_netem .. ifb: loss/reorder/duplicate on the guest's eth0 in both directions (the host
# kernel may lack netem; the guest's is Debian's, which has it).
# act_gact: the bed's cmfault drops every other matching CM MAD deterministically.
MODULES="virtio_pci virtio_net failover net_failover 9pnet_virtio 9p crc32_generic crc32_pclmul ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe ib_umad rdma_ucm sch_netem sch_prio sch_ingress cls_u32 act_mirred act_gact ifb"
# Guest binaries to copy: whole packages' bin dirs, plus single files.
BIN_PKGS="ibverbs-utils perftest rdmacm-utils"
BIN_EXTRA="/usr/bin/rdma /bin/ip /sbin/tc"

GUEST=$INTEROP_GUEST_DIR
DEBS=$INTEROP_CACHE/debs
WORK=$INTEROP_CACHE/work
# The stamp covers the build inputs that live in this directory.
STAMP_WANT=$(cat "$HERE/build.sh" "$HERE/init" | sha256sum | cut -c1-16)

if [ $FORCE = 0 ] && [ -s "$GUEST/vmlinuz" ] && [ -s "$GUEST/initrd.img" ] \
	&& [ "$(cat "$GUEST/stamp" 2>/dev/null)" = "$STAMP_WANT" ]; then
	[ -n "${INTEROP_QUIET:-}" ] || log "guest already built in $GUEST (use --force to rebuild)"
	exit 0
fi

T0=$(now_ms)
ensure_cmds apt-get:apt dpkg:dpkg xz:xz-utils sha256sum:coreutils flock:util-linux
mkdir -p "$DEBS" "$GUEST"
# one build at a time (the test runner and a developer may both start one)
exec 8>"$INTEROP_CACHE/build.lock"
flock -w 900 8 || die "another guest build holds $INTEROP_CACHE/build.lock"

apt_update() { log "apt-get update"; timeout 300 apt-get update >/dev/null || log "apt-get update failed"; }

# --- 1. resolve package names, 2. download (apt-get download skips .debs already present)
# resolve_and_download: sets KPKG KVER PKGS DEBFILE; fails (1) when a download fails, e.g.
# because the package lists name versions the mirror no longer has
declare -A DEBFILE
resolve_and_download() {
	local uris pkg file tmp
	KPKG=$INTEROP_KERNEL_PKG
	if [ -z "$KPKG" ]; then
		KPKG=$(apt-cache depends linux-image-amd64 | awk '$1=="Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
		[ -n "$KPKG" ] || { log "cannot resolve linux-image-amd64 to a kernel package"; return 1; }
	fi
	KVER=${KPKG#linux-image-}
	# Dependency closure of the userspace packages. All of it is downloaded and unpacked into
	# a staging tree; only the files the guest binaries need end up in the initramfs.
	local closure
	# shellcheck disable=SC2086
	closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances $TOP_PKGS | grep -v '^ ' | grep -v '^<' | sort -u)
	PKGS=$( { echo "$TOP_PKGS" | tr ' ' '\n'; echo "$closure"; } | sort -u | tr '\n' ' ')
	log "kernel package: $KPKG"
	log "userspace packages: $PKGS"
	tmp=$(mktemp -d)
	# shellcheck disable=SC2086
	uris=$(cd "$tmp" && timeout 120 apt-get download --print-uris "$KPKG" $PKGS 2>/dev/null) || true
	rmdir "$tmp"
	[ -n "$uris" ] || { log "apt-get download --print-uris returned nothing"; return 1; }
	DEBFILE=()
	while read -r _uri file _size _sum; do
		pkg=${file%%_*}
		DEBFILE[$pkg]=$file
	done <<<"$uris"
	local missing=()
	for pkg in "${!DEBFILE[@]}"; do
		[ -s "$DEBS/${DEBFILE[$pkg]}" ] || missing+=("$pkg")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	log "downloading ${#missing[@]} packages into $DEBS"
	(cd "$DEBS" && timeout 900 apt-get download "${missing[@]}" 2>&1 >/dev/null | grep -v '^W: Download is performed unsandboxed' >&2) || true
	for pkg in "${missing[@]}"; do
		[ -s "$DEBS/${DEBFILE[$pkg]}" ] || { log "download of $pkg failed"; return 1; }
	done
}
apt-cache show linux-image-amd64 >/dev/null 2>&1 || apt_update
if ! resolve_and_download; then
	apt_update
	resolve_and_download || die "could not download the guest's packages"
fi
T1=$(now_ms)

# --- 3. unpack ---------------------------------------------------------------------------
rm -rf "$WORK"
mkdir -p "$WORK/kernel" "$WORK/stage" "$WORK/root"
KDEB=$DEBS/${DEBFILE[$KPKG]}
log "unpacking $(basename "$KDEB")"
dpkg -x "$KDEB" "$WORK/kernel"
for pkg in $PKGS; do
	dpkg -x "$DEBS/${DEBFILE[$pkg]}" "$WORK/stage"
done
STAGE=$WORK/stage
ROOT=$WORK/root
BB=$STAGE/bin/busybox
[ -x "$BB" ] || die "busybox-static did not unpack to /bin/busybox"
KMOD=$WORK/kernel/lib/modules/$KVER
[ -d "$KMOD" ] || die "no modules for $KVER in $KPKG"
VMLINUZ=$WORK/kernel/boot/vmlinuz-$KVER
[ -s "$VMLINUZ" ] || die "no vmlinuz in $KPKG"

# --- 4. kernel modules: resolve dependencies with modules.dep ---------------------------
log "generating modules.dep (busybox depmod) and resolving module dependencies"
"$BB" depmod -b "$WORK/kernel" "$KVER"
# awk: depth-first over modules.dep, dependencies before dependants; prints "name path"
MODRES=$(awk -v want="$MODULES" '
	function norm(p,   n) { n = p; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n); return n }
	function visit(m,   i, n, d) {
		if (m in seen) return
		seen[m] = 1
		if (!(m in path)) { print "MISSING " m; return }
		n = split(deps[m], d, " ")
		for (i = 1; i <= n; i++) visit(d[i])
		print m " " path[m]
	}
	{
		p = $1; sub(/:$/, "", p); m = norm(p); path[m] = p; deps[m] = ""
		for (i = 2; i <= NF; i++) deps[m] = deps[m] " " norm($i)
	}
	END { n = split(want, w, " "); for (i = 1; i <= n; i++) { x = w[i]; gsub(/-/, "_", x); visit(x) } }
' "$KMOD/modules.dep")
MODORDER=()
declare -A MODPATH
while read -r name path; do
	if [ "$name" = MISSING ]; then
		grep -q "/${path}.ko\$" "$KMOD/modules.builtin" || die "kernel module $path not found in $KPKG"
		continue   # built into this kernel: nothing to load
	fi
	MODORDER+=("$name"); MODPATH[$name]=$path
done <<<"$MODRES"
mkdir -p "$ROOT/lib/modules/$KVER"
: >"$ROOT/etc-modules.list"
for m in "${MODORDER[@]}"; do
	p=${MODPATH[$m]}
	case "$p" in *.ko) ;; *) die "module $p is compressed; only plain .ko is handled" ;; esac
	mkdir -p "$ROOT/lib/modules/$KVER/$(dirname "$p")"
	cp "$KMOD/$p" "$ROOT/lib/modules/$KVER/$p"
	echo "$p" >>"$ROOT/etc-modules.list"
done
cp "$KMOD/modules.builtin" "$KMOD/modules.order" "$ROOT/lib/modules/$KVER/"
[ -f "$KMOD/modules.builtin.modinfo" ] && cp "$KMOD/modules.builtin.modinfo" "$ROOT/lib/modules/$KVER/"
"$BB" depmod -b "$ROOT" "$KVER"
log "modules (load order): ${MODORDER[*]}"

# --- 5. userspace: binaries + their shared libraries (resolved with the guest's ld.so) ---
log "copying userspace and resolving shared libraries"
LDSO=$STAGE/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
[ -e "$LDSO" ] || LDSO=$STAGE/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
[ -e "$LDSO" ] || die "no ld-linux-x86-64.so.2 in libc6"
LIBPATH=$STAGE/lib/x86_64-linux-gnu:$STAGE/usr/lib/x86_64-linux-gnu:$STAGE/usr/lib/x86_64-linux-gnu/libibverbs
copy_in() {   # copy_in /abs/path/inside/stage : copy file (and symlink chain) into ROOT
	local rel=$1 tgt
	while :; do
		[ -e "$STAGE$rel" ] || [ -L "$STAGE$rel" ] || die "missing in stage: $rel"
		mkdir -p "$ROOT$(dirname "$rel")"
		cp -a "$STAGE$rel" "$ROOT$rel"
		[ -L "$STAGE$rel" ] || break
		tgt=$(readlink "$STAGE$rel")
		case "$tgt" in /*) rel=$tgt ;; *) rel=$(dirname "$rel")/$tgt ;; esac
		rel=$(realpath -m -s "$rel")
	done
}
BINS=()
for pkg in $BIN_PKGS; do
	while IFS= read -r f; do
		case "$f" in /bin/*|/sbin/*|/usr/bin/*|/usr/sbin/*) [ -f "$STAGE$f" ] && BINS+=("$f") ;; esac
	done < <(dpkg -c "$DEBS/${DEBFILE[$pkg]}" | awk '{print $6}' | sed 's#^\./#/#')
done
read -ra extra <<<"$BIN_EXTRA"
BINS+=("${extra[@]}")
# dlopen()ed by libibverbs: the rxe provider and its driver file
RXE_PROVIDER=$(cd "$STAGE" && find usr/lib/x86_64-linux-gnu/libibverbs -name 'librxe-rdmav*.so' | sort | head -1)
[ -n "$RXE_PROVIDER" ] || die "librxe provider not found in ibverbs-providers"
DLOPEN=("/$RXE_PROVIDER")
# glibc dlopen()s libgcc_s for pthread_exit/pthread_cancel (rping and other threaded tools)
for f in /lib/x86_64-linux-gnu/libgcc_s.so.1 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1; do
	[ -e "$STAGE$f" ] && { DLOPEN+=("$f"); break; }
done
declare -A LIBSEEN
for f in "${BINS[@]}" "${DLOPEN[@]}"; do
	copy_in "$f"
	# scripts (e.g. perftest's run_perftest_*) need no libraries
	[ "$(head -c 4 "$STAGE$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
	out=$("$LDSO" --library-path "$LIBPATH" --list "$STAGE$f" 2>&1) || die "ld.so --list $f failed: $out"
	while read -r l; do
		case "$l" in
			*"not found"*) die "$f: unresolved library: $l" ;;
			*" => "*) lib=${l#* => }; lib=${lib%% (*} ;;
			/*) lib=${l%% (*} ;;
			*) continue ;;
		esac
		case "$lib" in
			"$STAGE"/*) lib=${lib#"$STAGE"} ;;
			*) die "$f: library $lib resolved outside the guest packages" ;;
		esac
		[ -n "${LIBSEEN[$lib]:-}" ] && continue
		LIBSEEN[$lib]=1
		copy_in "$lib"
	done <<<"$out"
done
# ld.so at its standard path (the /lib64 symlink in libc6 is absolute, recreate it)
mkdir -p "$ROOT/lib64" "$ROOT/etc/libibverbs.d"
ln -sf /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$ROOT/lib64/ld-linux-x86-64.so.2"
cp "$STAGE/etc/libibverbs.d/rxe.driver" "$ROOT/etc/libibverbs.d/"
[ -d "$STAGE/etc/libnl" ] && cp -a "$STAGE/etc/libnl" "$ROOT/etc/"
[ -d "$STAGE/etc/iproute2" ] && cp -a "$STAGE/etc/iproute2" "$ROOT/etc/"
[ -f "$STAGE/etc/rdma/rdma.conf" ] && mkdir -p "$ROOT/etc/rdma" && cp "$STAGE/etc/rdma/rdma.conf" "$ROOT/etc/rdma/"

# busybox + its applet links (made here, not at boot: every fork counts under TCG); a real
# tool of the same name already copied in (e.g. iproute2's ip) wins over the applet
mkdir -p "$ROOT/bin" "$ROOT/sbin" "$ROOT/usr/bin" "$ROOT/usr/sbin" "$ROOT/proc" "$ROOT/sys" \
	"$ROOT/dev" "$ROOT/tmp" "$ROOT/run" "$ROOT/host" "$ROOT/root" "$ROOT/etc/interop" "$ROOT/var/run"
cp "$BB" "$ROOT/bin/busybox"
declare -A REAL
for f in "${BINS[@]}"; do REAL[$(basename "$f")]=$f; done
# busybox sh runs its own applets before searching PATH, so a real tool that shares an
# applet's name (iproute2's ip) is reached through a function in a profile that the
# guest's init and every job source first
: >"$ROOT/etc/interop/profile"
for a in $("$BB" --list-full); do
	n=$(basename "$a")
	if [ -n "${REAL[$n]:-}" ]; then
		echo "$n() { ${REAL[$n]} \"\$@\"; }" >>"$ROOT/etc/interop/profile"
		continue
	fi
	[ -e "$ROOT/$a" ] || [ -L "$ROOT/$a" ] || ln -s /bin/busybox "$ROOT/$a"
done
mv "$ROOT/etc-modules.list" "$ROOT/etc/interop/modules.list"
echo "$KVER" >"$ROOT/etc/interop/kver"
install -m 0755 "$HERE/init" "$ROOT/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
printf '127.0.0.1 localhost\n' >"$ROOT/etc/hosts"
# ld.so cache (optional: the multiarch dirs are searched by default anyway)
if command -v ldconfig >/dev/null; then ldconfig -r "$ROOT" 2>/dev/null || true; fi

# --- 6. pack ------------------------------------------------------------------------------
# Under TCG, decompression is the slowest part of a boot, so both are stored uncompressed:
# the initramfs is a plain newc cpio, and the kernel is booted as the ELF vmlinux taken out
# of vmlinuz (qemu enters it through its PVH note, skipping the real-mode setup and the
# in-guest xz decompressor: ~14 s less per boot). vmlinuz stays as a fallback.
log "packing initramfs (uncompressed cpio)"
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | "$BB" cpio -o -H newc 2>/dev/null) >"$GUEST/initrd.img.new"
cp "$VMLINUZ" "$GUEST/vmlinuz.new"
rm -f "$GUEST/vmlinux.new"
XZOFF=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$VMLINUZ" | head -1 | cut -d: -f1 || true)
if [ -n "$XZOFF" ] && command -v xz >/dev/null; then
	tail -c +$((XZOFF + 1)) "$VMLINUZ" | xz -dc >"$GUEST/vmlinux.new" 2>/dev/null || true
fi
if [ -s "$GUEST/vmlinux.new" ] && [ "$(head -c 4 "$GUEST/vmlinux.new" | od -An -c | tr -d ' ')" = '177ELF' ]; then
	log "extracted vmlinux ($(stat -c %s "$GUEST/vmlinux.new") B) for PVH boot"
else
	log "could not extract an ELF vmlinux (not xz?); guests will boot vmlinuz (slower)"
	rm -f "$GUEST/vmlinux.new"
fi
mv "$GUEST/initrd.img.new" "$GUEST/initrd.img"
mv "$GUEST/vmlinuz.new" "$GUEST/vmlinuz"
if [ -f "$GUEST/vmlinux.new" ]; then mv "$GUEST/vmlinux.new" "$GUEST/vmlinux"; else rm -f "$GUEST/vmlinux"; fi
{
	echo "kernel: $KPKG ($KVER)"
	echo "packages:"; for pkg in $(echo "${!DEBFILE[@]}" | tr ' ' '\n' | sort); do echo "  ${DEBFILE[$pkg]}"; done
	echo "modules (load order):"; printf '  %s\n' "${MODORDER[@]}"
	echo "binaries:"; printf '  %s\n' "${BINS[@]}"
	echo "libraries:"; printf '%s\n' "${!LIBSEEN[@]}" | sort | sed 's/^/  /'
	echo "initrd size: $(stat -c %s "$GUEST/initrd.img") bytes"
} >"$GUEST/manifest.txt"
echo "$STAMP_WANT" >"$GUEST/stamp"
rm -rf "$WORK"
T2=$(now_ms)
log "built $GUEST: vmlinuz $(stat -c %s "$GUEST/vmlinuz") B, initrd.img $(stat -c %s "$GUEST/initrd.img") B"
log "timing: download $(( T1-T0 ))ms, unpack+assemble $(( T2-T1 ))ms, total $(( T2-T0 ))ms"
