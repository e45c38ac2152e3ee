package exec

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// softnic exec's options become Options; the program and its arguments
// follow "--" untouched.
func TestParse(t *testing.T) {
	lib, o, argv, err := Parse([]string{"--addr", "127.0.0.9", "--mtu", "1024", "--busy-poll", "20us",
		"--poll-wait", "--pcap", "x-%p.pcap", "--debug", "--lib", "/l", "--", "ib_write_bw", "-x", "1", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Addr: netip.MustParseAddr("127.0.0.9"), MTU: 1024, BusyPoll: 20 * time.Microsecond,
		PollWait: true, Pcap: "x-%p.pcap", Debug: true}
	if lib != "/l" || o != want || !slices.Equal(argv, []string{"ib_write_bw", "-x", "1", "10.0.0.1"}) {
		t.Errorf("Parse = %q, %+v, %q", lib, o, argv)
	}
	for _, bad := range [][]string{
		{"--"}, {}, {"--addr", "x", "--", "p"}, {"--mtu", "1500", "--", "p"}, {"--port", "70000", "--", "p"},
		{"--nope", "--", "p"},
	} {
		if _, _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// A bad command line prints the usage and exits 2; -h prints it and
// exits 0; a missing library says how to build it.
func TestCommandErrors(t *testing.T) {
	var b bytes.Buffer
	if st := Command([]string{"--mtu", "7", "--", "true"}, &b); st != 2 || !strings.Contains(b.String(), "usage: softnic exec") {
		t.Errorf("bad MTU: status %d, %q", st, b.String())
	}
	b.Reset()
	if st := Command([]string{"-h"}, &b); st != 0 || !strings.HasPrefix(b.String(), "usage: softnic exec") {
		t.Errorf("-h: status %d, %q", st, b.String())
	}
	b.Reset()
	if st := Command([]string{"--lib", t.TempDir(), "--", "true"}, &b); st != 1 || !strings.Contains(b.String(), "scripts/clib") {
		t.Errorf("no library: status %d, %q", st, b.String())
	}
}
