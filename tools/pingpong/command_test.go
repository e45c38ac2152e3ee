package pingpong

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
)

// TestParseDevice: -d names the device; -m takes the five IB MTUs and
// refuses anything else with the option's name.
func TestParseDevice(t *testing.T) {
	opts := toolcmd.Options(opts(RC))
	for _, tt := range []struct {
		args    []string
		dev     string
		mtu     ibv.MTU
		wantErr string
	}{
		{nil, "", ibv.MTU1024, ""},
		{[]string{"-d", "rxe0", "-m", "2048"}, "rxe0", ibv.MTU2048, ""},
		{[]string{"--mtu=256"}, "", ibv.MTU256, ""},
		{[]string{"-m", "1000"}, "", 0, `invalid --mtu "1000" (256, 512, 1024, 2048 or 4096)`},
		{[]string{"-m", "x"}, "", 0, `invalid --mtu "x" (256, 512, 1024, 2048 or 4096)`},
	} {
		r, err := getopt.Parse(opts, tt.args)
		if err != nil {
			t.Fatal(err)
		}
		dev, mtu := "", ibv.MTU1024
		err = ParseDevice(r, &dev, &mtu)
		if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) || dev != tt.dev || (err == nil && mtu != tt.mtu) {
			t.Errorf("%q: dev %q, mtu %v, %v; want %q, %v, %q", tt.args, dev, mtu, err, tt.dev, tt.mtu, tt.wantErr)
		}
	}
}
