package decode_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/tools/decode"
)

// FuzzDecodePcap decodes arbitrary bytes as a capture file, in text and
// JSON, and never panics. The counts always add up, the text output ends
// with the summary line and every JSON line is an object.
func FuzzDecodePcap(f *testing.F) {
	// Seeds: the first records of each real capture, the samples as raw IP
	// and Ethernet pcap and as pcapng.
	for _, c := range rxeCaptures {
		cis, frames := rxeFrames(f, c.file)
		n := min(len(frames), 3)
		var buf bytes.Buffer
		w := pcapgo.NewWriter(&buf)
		w.WriteFileHeader(65536, layers.LinkTypeEthernet)
		for i := range n {
			w.WritePacket(cis[i], frames[i])
		}
		f.Add(buf.Bytes())
	}
	ss := samples(f)
	for _, link := range []layers.LinkType{layers.LinkTypeRaw, layers.LinkTypeEthernet} {
		var buf bytes.Buffer
		w, err := capture.NewWriter(&buf, link)
		if err != nil {
			f.Fatal(err)
		}
		for _, s := range ss[:6] {
			w.WriteDatagram(sampleTime, &s.encap, s.build(f))
		}
		f.Add(buf.Bytes())
	}
	// The CM messages and broken MADs on QP 1.
	{
		var buf bytes.Buffer
		w, _ := capture.NewWriter(&buf, layers.LinkTypeRaw)
		for _, s := range cmSamples() {
			w.WriteDatagram(sampleTime, &s.encap, s.build(f))
		}
		f.Add(buf.Bytes())
	}
	var ng bytes.Buffer
	nw, err := pcapgo.NewNgWriter(&ng, layers.LinkTypeRaw)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range ss[10:14] {
		var rec bytes.Buffer
		cw, _ := capture.NewWriter(&rec, layers.LinkTypeRaw)
		cw.WriteDatagram(sampleTime, &s.encap, s.build(f))
		frame := rec.Bytes()[24+16:] // skip the pcap file and record headers
		nw.WritePacket(ciOf(frame), frame)
	}
	nw.Flush()
	f.Add(ng.Bytes())

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []decode.Options{{}, {JSON: true}} {
			var out bytes.Buffer
			d := decode.NewDecoder(&out, opts)
			_ = d.Decode("fuzz.pcap", bytes.NewReader(data))
			sum, err := d.Finish()
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if sum.Packets != sum.ICRCOK+sum.ICRCBad+sum.Malformed {
				t.Fatalf("counts do not add up: %+v", sum)
			}
			if sum.Files != 1 || sum.UnreadableFiles > 1 {
				t.Fatalf("file counts: %+v", sum)
			}
			if !opts.JSON {
				if got, want := lastLine(out.String()), sum.Line(); got != want {
					t.Fatalf("got last line %q, want %q", got, want)
				}
				continue
			}
			dec := json.NewDecoder(&out)
			for dec.More() {
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("JSON output: %v", err)
				}
			}
		}
	})
}

func ciOf(frame []byte) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: sampleTime, CaptureLength: len(frame), Length: len(frame)}
}
