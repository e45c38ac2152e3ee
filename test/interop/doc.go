// Package interop runs softnic against the Linux kernel's Soft-RoCE driver
// (rdma_rxe): rdma-core's ibv_*_pingpong and perftest's ib_* tools in a qemu
// guest on one end of a bridge, softnic's look-alike tools on the other, real
// RoCEv2 packets between them, every run captured on the bridge and checked
// with "softnic decode".
//
// The test bed is the bash script bed next to this file (guest build,
// namespace, bridge, taps, guest jobs, captures, MTU, netem); the matrix is
// the table-driven test in interop_test.go, built only with the "interop" tag
// and run as root:
//
//	test/interop/run                                  # bed up, suite, bed down, summary
//	go test -tags interop -v ./test/interop/ -run .   # the same, without the wrapper
//
// README.md in this directory says how it works and how to add a case.
package interop
