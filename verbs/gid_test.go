package verbs_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/verbs"
)

// TestGIDJSON checks that a GID is a string in JSON, in the form
// ibv_devinfo prints, and that the string reads back to the same GID.
func TestGIDJSON(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want string
	}{
		{"127.0.0.2", `"::ffff:127.0.0.2"`},
		{"::ffff:10.1.2.3", `"::ffff:10.1.2.3"`},
		{"fe80::5054:ff:fe12:3456", `"fe80::5054:ff:fe12:3456"`},
		{"2001:db8::1", `"2001:db8::1"`},
		{"::", `"::"`},
	} {
		g := verbs.GIDFromAddr(netip.MustParseAddr(tt.addr))
		b, err := json.Marshal(struct{ G verbs.GID }{g})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"G":` + tt.want + `}`; string(b) != want {
			t.Errorf("%s: got %s, want %s", tt.addr, b, want)
		}
		var back struct{ G verbs.GID }
		if err := json.Unmarshal(b, &back); err != nil || back.G != g {
			t.Errorf("%s: read back %v, %v; want %v", tt.addr, back.G, err, g)
		}
	}
	for _, bad := range []string{`"10.0.0"`, `"fe80::1%eth0"`, `""`, `"softnic0"`} {
		var g verbs.GID
		err := g.UnmarshalText([]byte(bad[1 : len(bad)-1]))
		if !errors.Is(err, verbs.EINVAL) {
			t.Errorf("UnmarshalText(%s): got %v, want EINVAL", bad, err)
		}
		if err := json.Unmarshal([]byte(bad), &g); err == nil {
			t.Errorf("json.Unmarshal(%s): got no error", bad)
		}
	}
}
