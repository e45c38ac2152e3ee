package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCMToolsCommandLine checks the command lines the CM tools refuse
// before they open a NIC, with the C tools' statuses and words.
func TestCMToolsCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		status   int
		out, err string
	}{
		{[]string{"rping"}, 22, "usage: softnic rping -s", ""},
		{[]string{"rping", "-s", "-S", "25"}, 22, "", "Invalid size 25 (valid range is 26 to 65536)"},
		{[]string{"rping", "-c", "-C", "-1", "-a", "127.0.0.1"}, 22, "", "Invalid count -1"},
		{[]string{"rping", "-x"}, 22, "usage: softnic rping", "invalid option"},
		{[]string{"rping", "-h"}, 0, "usage: softnic rping", ""},
		{[]string{"ucmatose", "-z"}, 1, "usage: softnic ucmatose", ""},
		{[]string{"udaddy", "-f", "gid"}, 1, "", "AF_IB addresses are not supported"},
		{[]string{"mckey"}, 1, "usage: softnic mckey -m", ""},
		{[]string{"mckey", "-M", "ff0e::1", "-b", "::1"}, 1, "", "-M: AF_IB multicast addresses are not supported"},
		{[]string{"rdma_client", "-q"}, 1, "usage: softnic rdma_client", ""},
		{[]string{"rdma_server", "extra"}, 1, "usage: softnic rdma_server", ""},
	} {
		var o, e bytes.Buffer
		st := run(tt.args, &o, &e)
		if st != tt.status || !strings.Contains(o.String(), tt.out) || !strings.Contains(e.String(), tt.err) {
			t.Errorf("softnic %v: status %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, st, tt.status, o.String(), e.String())
		}
	}
}

func TestCMToolsInHelp(t *testing.T) {
	var o, e bytes.Buffer
	if st := run([]string{"help"}, &o, &e); st != 0 {
		t.Fatalf("help: %d", st)
	}
	for _, c := range []string{"rping", "ucmatose", "rdma_server", "rdma_client", "udaddy", "mckey"} {
		if !strings.Contains(o.String(), "\t"+c+" ") {
			t.Errorf("help does not list %s:\n%s", c, o.String())
		}
		var ho, he bytes.Buffer
		if st := run([]string{"help", c}, &ho, &he); st != 0 || !strings.Contains(ho.String(), "usage: softnic "+c) {
			t.Errorf("help %s: %d\n%s%s", c, st, ho.String(), he.String())
		}
	}
}
