package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const rc64 = "../../wire/testdata/rc_pingpong_64.pcap"

// corrupt writes a copy of rc64 with one payload byte flipped.
func corrupt(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(rc64)
	if err != nil {
		t.Fatal(err)
	}
	// pcap header 24, record header 16, Ethernet 14, IPv4 20, UDP 8, BTH 12.
	b[24+16+14+20+8+12+5] ^= 0x80
	path := filepath.Join(t.TempDir(), "bad.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun(t *testing.T) {
	bad := corrupt(t)
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantOut    string // substring of stdout
		wantErr    string // substring of stderr
	}{
		{"no args", nil, exitUsage, "", "Usage:"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"-h", []string{"-h"}, exitOK, "decode", ""},
		{"--help", []string{"--help"}, exitOK, "version", ""},
		{"help", []string{"help"}, exitOK, "Commands:", ""},
		{"help decode", []string{"help", "decode"}, exitOK, "usage: softnic decode [--json] FILE.pcap...", ""},
		{"help help", []string{"help", "help"}, exitOK, "usage: softnic help", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"help two", []string{"help", "decode", "version"}, exitUsage, "", "usage: softnic help"},
		{"version", []string{"version"}, exitOK, "softnic ", ""},
		{"version extra", []string{"version", "x"}, exitUsage, "", "unexpected argument"},
		{"decode no files", []string{"decode"}, exitUsage, "", "no capture files"},
		{"decode bad flag", []string{"decode", "--jsn", rc64}, exitUsage, "", "flag provided but not defined: -jsn"},
		{"decode -h", []string{"decode", "-h"}, exitOK, "", "usage: softnic decode"},
		{"decode", []string{"decode", rc64}, exitOK, "\n20 packets, 20 icrc ok, 0 icrc bad\n", ""},
		{"decode json first", []string{"decode", "--json", rc64}, exitOK, `"type":"summary"`, ""},
		{"decode json last", []string{"decode", rc64, "-json"}, exitOK, `"icrc_ok":20`, ""},
		{"decode after --", []string{"decode", "--", rc64}, exitOK, "20 packets", ""},
		{"decode bad icrc", []string{"decode", bad}, exitFail, "20 packets, 19 icrc ok, 1 icrc bad", ""},
		{"decode missing file", []string{"decode", rc64, "missing.pcap"}, exitFail, "20 packets, 20 icrc ok, 0 icrc bad", "missing.pcap"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		got := run(tt.args, &stdout, &stderr)
		if got != tt.wantStatus {
			t.Errorf("%s: got status %d, want %d\nstdout: %s\nstderr: %s", tt.name, got, tt.wantStatus, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), tt.wantOut) {
			t.Errorf("%s: stdout %q lacks %q", tt.name, stdout.String(), tt.wantOut)
		}
		if !strings.Contains(stderr.String(), tt.wantErr) {
			t.Errorf("%s: stderr %q lacks %q", tt.name, stderr.String(), tt.wantErr)
		}
	}
}

func TestDecodeJSONParses(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := run([]string{"decode", "--json", rc64}, &stdout, &stderr); got != exitOK {
		t.Fatalf("got status %d, want %d: %s", got, exitOK, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	n := 0
	var last map[string]any
	for dec.More() {
		last = nil
		if err := dec.Decode(&last); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 21 || last["type"] != "summary" || last["packets"] != 20.0 {
		t.Errorf("got %d objects ending with %v, want 20 packets and a summary", n, last)
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commandList() {
		var stdout, stderr bytes.Buffer
		if got := run([]string{"help", c.Name}, &stdout, &stderr); got != exitOK {
			t.Errorf("help %s: got status %d, want %d: %s", c.Name, got, exitOK, stderr.String())
		}
		if !strings.Contains(stdout.String(), "usage: softnic "+c.Name) {
			t.Errorf("help %s: got %q, want a usage line", c.Name, stdout.String())
		}
		if c.Summary == "" {
			t.Errorf("command %s has no summary", c.Name)
		}
	}
}
