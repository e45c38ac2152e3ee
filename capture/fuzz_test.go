package capture_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/wire"
)

// FuzzLayer feeds arbitrary UDP payloads through the RoCE layer, both
// directly and as a gopacket decoder, and never panics. A payload that
// decodes is rebuilt with wire.Build from its decoded headers and payload
// and must decode to the same thing again (quic-go FuzzFrames style).
func FuzzLayer(f *testing.F) {
	for _, s := range append(samplePackets(f, encap4), samplePackets(f, encap6)...) {
		f.Add(s.payload)
	}
	for _, c := range rxeCaptures {
		ds, err := capture.ReadFile(filepath.Join(testdata, c.file))
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range ds[:min(len(ds), 4)] {
			f.Add(d.Payload)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r capture.RoCE
		err := r.DecodeFromBytes(data, gopacket.NilDecodeFeedback)
		_ = r.String()
		pkt := gopacket.NewPacket(data, capture.LayerTypeRoCE, gopacket.Default)
		_ = pkt.String()
		_ = capture.CheckICRC(pkt)
		if (pkt.ErrorLayer() == nil) != (err == nil) {
			t.Fatalf("DecodeFromBytes error %v, but gopacket error layer %v", err, pkt.ErrorLayer())
		}
		if err != nil {
			return
		}
		if got, want := len(r.LayerContents())+len(r.LayerPayload())+r.Pad+wire.ICRCLen, len(data); got != want {
			t.Fatalf("headers+payload+pad+ICRC is %d bytes, packet %d", got, want)
		}

		h := r.Packet.Headers()
		b := make([]byte, wire.PacketLen(r.Opcode, len(r.LayerPayload())))
		n, err := wire.Build(b, &encap4, &h, r.LayerPayload())
		if err != nil {
			t.Fatalf("rebuilding %s: %v", r.String(), err)
		}
		var again capture.RoCE
		if err := again.DecodeFromBytes(b[:n], gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("rebuilt %s does not decode: %v", r.String(), err)
		}
		if again.Packet.Headers() != h || !bytes.Equal(again.LayerPayload(), r.LayerPayload()) {
			t.Fatalf("round trip: got %s, want %s", again.String(), r.String())
		}
		if got, want := again.String(), r.String(); got != want {
			t.Fatalf("round trip: got %q, want %q", got, want)
		}
		if err := wire.CheckICRC(&encap4, b[:n]); err != nil {
			t.Fatalf("rebuilt packet: %v", err)
		}
	})
}
