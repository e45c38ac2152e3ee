// Package twohost runs softnic's "two softnic processes" use case across a
// real network: two network namespaces ("hosts" A and B) joined by a veth
// pair, at interface MTU 1500 and 9000, over IPv4 and IPv6, every softnic
// tool pair between them (server on A, client on B) with its data checked,
// "softnic demo" split across the two hosts, and "softnic info" on each MTU.
//
// The test bed is the bash script bed next to this file; the matrix is the
// table-driven test in twohost_test.go, built only with the "twohost" tag
// and run as root:
//
//	test/twohost/run                                   # bed up, matrix, bed down, summary
//	go test -tags twohost -v ./test/twohost/ -run .    # the matrix alone, on a bed that is up
//
// README.md in this directory says what it covers and how to add a case.
package twohost
