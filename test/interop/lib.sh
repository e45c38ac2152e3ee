# shellcheck shell=bash
# lib.sh - settings and helpers shared by softnic's interop test-bed scripts (bed, run,
# guest/build.sh). Sourced, not run. Every setting can be overridden from the environment.
# Adapted from the rxe-peer harness the project started from.

: "${INTEROP_CACHE:=/var/cache/softnic-interop}"  # downloaded .debs + built guest (kept between runs)
: "${INTEROP_STATE:=/run/softnic-interop}"        # per-run state: pid files, consoles, 9p shares
: "${INTEROP_NETNS:=softnic-interop}"             # network namespace: bridge, taps, host end
: "${INTEROP_BRIDGE:=snbr0}"                      # bridge inside the namespace
: "${INTEROP_NET:=10.77.0}"                       # /24 test subnet (exists only inside the namespace)
: "${INTEROP_NET6:=fd77:}"                        # /64 ULA prefix: guest 10.77.0.N is fd77::N
: "${INTEROP_HOST_IP:=${INTEROP_NET}.1}"          # host end (on the bridge) ...
: "${INTEROP_HOST_IP6:=${INTEROP_NET6}:1}"        # ... and its IPv6 address
: "${INTEROP_ACCEL:=auto}"                        # auto | kvm | tcg
: "${INTEROP_MEM:=512}"                           # guest RAM in MiB
: "${INTEROP_MTU:=1500}"                          # bridge/tap/eth0 MTU at start (rxe active MTU 1024)
: "${INTEROP_BOOT_TIMEOUT:=120}"                  # seconds for a guest to become ready
: "${INTEROP_LIFETIME:=3600}"                     # a guest powers itself off after this many seconds
: "${INTEROP_KERNEL_PKG:=}"                       # e.g. linux-image-6.1.0-56-amd64; empty: linux-image-amd64's

# shellcheck disable=SC2034  # used by the scripts that source this file
INTEROP_GUEST_DIR="$INTEROP_CACHE/guest"
INTEROP_MAC_PREFIX="52:54:00:4d:77"

log()  { printf '[interop %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { log "ERROR: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# now_ms: wall clock in milliseconds (for step timings)
now_ms() { date +%s%3N; }

# apt_install PKG... : install host tools that are missing (quietly, non-interactive, bounded)
apt_install() {
	[ $# -gt 0 ] || return 0
	log "installing host packages: $*"
	if ! DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update >/dev/null 2>&1 || true
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends "$@" >/dev/null \
			|| die "apt-get install $* failed"
	fi
}

# ensure_cmds CMD:PKG ... : install PKG when CMD is not on PATH
ensure_cmds() {
	local want=() spec
	for spec in "$@"; do
		command -v "${spec%%:*}" >/dev/null 2>&1 || want+=("${spec#*:}")
	done
	apt_install "${want[@]}"
}

# wait_for SECONDS CMD... : poll CMD every 0.2 s until it succeeds; 1 on timeout
wait_for() {
	local t=$1; shift
	local end=$(( $(date +%s) + t ))
	while ! "$@" 2>/dev/null; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# pid_alive PID: the process exists and is not a zombie
pid_alive() {
	[ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
pid_gone() { ! pid_alive "$1"; }

# kill_pid PID [GRACE]: TERM, wait up to GRACE seconds, then KILL and wait up to 5 s more.
# Callers pass only PIDs that the scripts recorded themselves (and checked).
kill_pid() {
	local pid=$1 grace=${2:-5}
	pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_for "$grace" pid_gone "$pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait_for 5 pid_gone "$pid" || log "process $pid did not exit after SIGKILL"
	fi
}

ns_exists() { [ -e "/run/netns/$INTEROP_NETNS" ]; }
ns_exec()   { ip netns exec "$INTEROP_NETNS" "$@"; }

# a guest's address decides its tap, MAC and IPv6 address: 10.77.0.N -> sntapN, ..:0N, fd77::N
octet_of() { echo "${1##*.}"; }
tap_of()   { echo "sntap$(octet_of "$1")"; }
mac_of()   { printf '%s:%02x\n' "$INTEROP_MAC_PREFIX" "$(octet_of "$1")"; }
ip6_of()   { printf '%s:%s\n' "$INTEROP_NET6" "$(octet_of "$1")"; }

# accel_args: print the qemu acceleration + CPU arguments (KVM when it really works, else TCG).
accel_args() {
	local cpu
	case "$INTEROP_ACCEL" in
		tcg) echo "-accel tcg,thread=multi -cpu max" ;;
		kvm) cpu=$(kvm_cpu) || cpu=${INTEROP_KVM_CPU:-host}; echo "-accel kvm -cpu $cpu" ;;
		auto) if cpu=$(kvm_cpu); then echo "-accel kvm -cpu $cpu"; else echo "-accel tcg,thread=multi -cpu max"; fi ;;
		*) die "INTEROP_ACCEL must be auto, kvm or tcg" ;;
	esac
}

# kvm_cpu: print a CPU model with which KVM really runs guest code, or fail.
# /dev/kvm alone proves nothing: on some hosts it is a paravirtual KVM (kvm_pvm) on a CPU
# without vmx/svm, where an unmodified kernel hangs in its decompressor. So KVM is tried only
# when the CPU shows vmx or svm; then a CPU model is probed by running SeaBIOS for up to 3 s
# and looking for its "Running on KVM" line on the debug console.
# Cached for this host boot in $INTEROP_STATE/kvm-cpu ("none" = use TCG).
kvm_cpu() {
	local f="$INTEROP_STATE/kvm-cpu" r=none cpu dbg
	if [ ! -f "$f" ]; then
		mkdir -p "$INTEROP_STATE"
		if [ -c /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo \
			&& command -v qemu-system-x86_64 >/dev/null; then
			dbg=$(mktemp)
			for cpu in host host,-arch-capabilities qemu64; do
				: >"$dbg"
				timeout 3 qemu-system-x86_64 -accel kvm -cpu "$cpu" -m 64 -nodefaults -display none \
					-serial none -monitor none -no-reboot \
					-chardev file,id=dbg,path="$dbg" -device isa-debugcon,iobase=0x402,chardev=dbg \
					>/dev/null 2>&1 || true
				if grep -q "Running on KVM" "$dbg"; then r=$cpu; break; fi
			done
			rm -f "$dbg"
		fi
		echo "$r" >"$f"
	fi
	r=$(cat "$f")
	[ "$r" != none ] && echo "$r"
}
