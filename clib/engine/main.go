// Command engine is softnic's libibverbs engine, built with
// -buildmode=c-shared as libsoftnic.so: the Go half of softnic's
// libibverbs.so.1 (clib/libibverbs), which loads it with dlopen on the
// first ibv_open_device. It exports the functions of
// clib/include/softnic_engine.h and keeps the Go objects behind the C
// library's structs in tables (table.go), handing the C library integer
// handles; it reaches the engine only through package verbs.
//
// Each exported function is a thin conversion between the C values and
// verbs' calls: the errno a verbs error wraps is the return value, as
// libibverbs returns it. The NIC is the process's one device
// (device.go), configured by the SOFTNIC_* environment (clib/exec).
package main

import "runtime"

// minProcs is the fewest Ps the engine runs with. A C thread that calls
// into Go keeps its P between calls (cgocallbackg reenters the syscall
// state on return, and sysmon takes the P back only after a tick), so a
// program that polls in a loop all but holds one: with GOMAXPROCS=1 the
// engine's own goroutines (its processors, its receive goroutine, the
// event fds' waits) would wait for sysmon each time.
const minProcs = 2

func init() {
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}

func main() {}
