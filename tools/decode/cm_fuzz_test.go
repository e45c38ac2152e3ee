package decode

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/wire"
)

// FuzzMAD decodes arbitrary bytes as a QP1 payload: never a panic; the
// text group is one bracketed line; the JSON form marshals; a payload
// wire.ParseMAD refuses carries an error, and one it takes carries a
// message exactly when it is a CM message wire lays out.
func FuzzMAD(f *testing.F) {
	file, err := os.Open("../../wire/testdata/rping_cm.pcap")
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	r, err := capture.NewReader(file)
	if err != nil {
		f.Fatal(err)
	}
	for {
		dg, err := r.Next()
		if err != nil {
			break
		}
		if len(dg.Payload) == 12+8+wire.MADLen+4 { // BTH, DETH, the MAD, ICRC
			f.Add(dg.Payload[20 : 20+wire.MADLen])
		}
	}
	f.Add(make([]byte, wire.MADLen))
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMAD(data)
		s := m.String()
		if len(s) < 4 || s[len(s)-1] != ']' {
			t.Fatalf("group %q", s)
		}
		for _, c := range s {
			if c == '\n' {
				t.Fatalf("group spans lines: %q", s)
			}
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		_, perr := wire.ParseMAD(data)
		if perr != nil && m.Error == "" {
			t.Fatalf("ParseMAD: %v, but no error in %+v", perr, m)
		}
		_, cerr := wire.ParseCM(data) // refuses anything shorter than a MAD
		has := m.REQ != nil || m.MRA != nil || m.REJ != nil || m.REP != nil || m.RTU != nil || m.DREQ != nil ||
			m.DREP != nil || m.SIDRReq != nil || m.SIDRRep != nil || m.LAP != nil || m.APR != nil
		if want := cerr == nil && wire.CMLayout(wire.MAD(data).AttrID()) != nil; has != want {
			t.Fatalf("message decoded %v, want %v (ParseCM: %v): %s", has, want, cerr, s)
		}
		if perr != nil && !errors.Is(perr, wire.ErrBadMAD) {
			t.Fatal(perr)
		}
	})
}
