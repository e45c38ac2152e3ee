//go:build !linux

package link_test

// udpCapRows is empty: the UDP link needs Linux.
func udpCapRows() []capRow { return nil }
