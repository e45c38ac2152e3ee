package tooljson

import (
	"encoding/json"
	"math"
	"testing"
)

func TestHex64(t *testing.T) {
	for _, tt := range []struct {
		v    uint64
		want string
	}{
		{0, `"0x0000000000000000"`},
		{0x7f3a5c000000, `"0x00007f3a5c000000"`},
		{math.MaxUint64, `"0xffffffffffffffff"`},
		{1<<53 + 1, `"0x0020000000000001"`},
	} {
		b, err := json.Marshal(Hex64(tt.v))
		if err != nil || string(b) != tt.want {
			t.Errorf("%#x: got %s, %v; want %s", tt.v, b, err, tt.want)
		}
		var back Hex64
		if err := json.Unmarshal(b, &back); err != nil || uint64(back) != tt.v {
			t.Errorf("%s: read back %#x, %v", b, uint64(back), err)
		}
	}
	for _, bad := range []string{`"1234"`, `"0x"`, `"0x1ffffffffffffffff"`, `"0xg"`, `12`} {
		var h Hex64
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("%s: got %#x, want an error", bad, uint64(h))
		}
	}
}

func TestDecode(t *testing.T) {
	type doc struct {
		A int `json:"a"`
	}
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{"a":1}`, true},
		{"{\"a\":1}\n", true},
		{`{"a":1,"b":2}`, false},        // unknown key
		{`{"a":1}{"a":2}`, false},       // a second document
		{"{\"a\":1}\nwarning\n", false}, // text after it
		{"notice\n{\"a\":1}", false},    // text before it
		{``, false},
	} {
		var d doc
		err := Decode([]byte(tt.in), &d)
		if (err == nil) != tt.ok {
			t.Errorf("%q: got %v, want ok=%v", tt.in, err, tt.ok)
		}
		if tt.ok && d.A != 1 {
			t.Errorf("%q: got %+v", tt.in, d)
		}
	}
}
