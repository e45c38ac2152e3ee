package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/tmpingpong"
	"github.com/softnic/softnic/tools/tooljson"
)

// tm_pingpong in-process on the fabric: the server's text, the client's
// --json (strict: one object on stdout, the text lines on stderr).
func TestTMPingpongCommand(t *testing.T) {
	// Messages of 2048, 1024 (rendezvous), 512 and 256 bytes; 8 windows.
	args := []string{"-n", "30", "-t", "4", "-u", "1", "-s", "2048", "-r", "1024", "-c"}
	srv, cli := runToolPair(t, "tm_pingpong", args, append([]string{"--json"}, args...))
	if srv.status != 0 || cli.status != 0 {
		t.Fatalf("server: %d\n%s%s\nclient: %d\n%s%s", srv.status, srv.out, srv.errOut, cli.status, cli.out, cli.errOut)
	}
	if !tmReceived.MatchString(srv.out) || !strings.Contains(srv.out, "sent: 14 eager, 16 rendezvous\n") {
		t.Errorf("server output:\n%s", srv.out)
	}
	var r tmpingpong.Result
	if err := tooljson.Decode([]byte(cli.out), &r); err != nil {
		t.Fatalf("client --json: %v\n%s", err, cli.out)
	}
	if r.Matched+r.Unexpected != 30 || r.Eager != 14 || r.Rendezvous != 16 || r.Late != 8 || !r.Checked {
		t.Errorf("client: %+v", r)
	}
	if got := gidStrings(t, "client", []byte(cli.out)); len(got) != 0 {
		t.Errorf("unexpected gid keys: %v", got)
	}
	if !strings.Contains(cli.errOut, "  remote address: ") || !tmReceived.MatchString(cli.errOut) {
		t.Errorf("client stderr lacks the text lines:\n%s", cli.errOut)
	}
}

func TestTMPingpongCommandErrors(t *testing.T) {
	useFabric(t)
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"tm_pingpong", "-t", "0"}, `invalid --tags "0"`},
		{[]string{"tm_pingpong", "-t", "257"}, `invalid --tags "257"`},
		{[]string{"tm_pingpong", "-r", "-1"}, `invalid --rndv "-1"`},
		{[]string{"tm_pingpong", "-t", "4", "-u", "5"}, "unexpected must be 0..tags (4)"},
		{[]string{"tm_pingpong", "-m", "1000"}, "invalid --mtu"},
		{[]string{"tm_pingpong", "-s", "0"}, `invalid --size "0"`},
		{[]string{"tm_pingpong", "a", "b"}, "more than one host"},
	} {
		var o, e bytes.Buffer
		if got := run(tt.args, &o, &e); got != exitFail {
			t.Errorf("%q: got status %d, want %d", tt.args, got, exitFail)
		}
		if !strings.Contains(e.String(), tt.wantErr) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, e.String(), tt.wantErr)
		}
	}
}
