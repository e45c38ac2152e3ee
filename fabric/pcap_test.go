package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

type pcapRecord struct {
	ts   time.Time
	data []byte
}

// readPcap parses a little-endian, microsecond pcap file by hand.
func readPcap(t *testing.T, b []byte) []pcapRecord {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 24 {
		t.Fatalf("pcap file of %d bytes has no global header", len(b))
	}
	if got := le.Uint32(b[0:]); got != 0xA1B2C3D4 {
		t.Fatalf("magic %#x, want 0xa1b2c3d4", got)
	}
	if maj, min := le.Uint16(b[4:]), le.Uint16(b[6:]); maj != 2 || min != 4 {
		t.Errorf("version %d.%d, want 2.4", maj, min)
	}
	snap := le.Uint32(b[16:])
	if got := le.Uint32(b[20:]); got != 101 {
		t.Fatalf("link type %d, want 101 (LINKTYPE_RAW)", got)
	}
	var recs []pcapRecord
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 {
			t.Fatalf("truncated record header (%d bytes)", len(b))
		}
		sec, usec := le.Uint32(b[0:]), le.Uint32(b[4:])
		incl, orig := le.Uint32(b[8:]), le.Uint32(b[12:])
		if incl != orig || incl > snap || usec >= 1e6 {
			t.Fatalf("bad record header: incl %d orig %d snap %d usec %d", incl, orig, snap, usec)
		}
		if int(incl) > len(b)-16 {
			t.Fatalf("record of %d bytes, %d left", incl, len(b)-16)
		}
		recs = append(recs, pcapRecord{time.Unix(int64(sec), int64(usec)*1000).UTC(), b[16 : 16+incl]})
		b = b[16+incl:]
	}
	return recs
}

func TestPcap(t *testing.T) {
	var buf bytes.Buffer
	mc := clock.NewManual(t0)
	f := New(Config{Clock: mc, Pcap: &buf})
	a, _ := f.Attach(addrA)
	b, _ := f.Attach(addrB)
	a6, _ := f.Attach(addr6A)
	f.Attach(addr6B)

	var sent []wire.Encap
	send := func(from *Endpoint, e wire.Encap, op wire.Opcode, psn wire.PSN, n int) {
		pkt := build(t, &e, op, psn, payload(int(psn), n))
		if _, err := from.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, e)
		mc.Advance(1500 * time.Microsecond)
	}
	e4 := newEncap(addrA, addrB)
	e4.ID = 77
	send(a, e4, wire.RCWriteFirst, 1, 256)
	send(b, newEncap(addrB, addrA), wire.RCAck, 2, 0)
	e6 := newEncap(addr6A, addr6B)
	e6.FlowLabel = 0xABCDE
	e6.TrafficClass = 0x10
	send(a6, e6, wire.RCSendOnlyImm, 3, 33)
	send(a, newEncap(addrA, addrC), wire.RCSendOnly, 4, 8) // no route: still captured
	// Mixed families have no IP header to write: not captured.
	a.WriteBatch([]link.Datagram{{Encap: newEncap(addrA, addr6B), Buf: make([]byte, 32)}})

	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	recs := readPcap(t, buf.Bytes())
	if len(recs) != len(sent) {
		t.Fatalf("%d records, want %d", len(recs), len(sent))
	}
	for i, r := range recs {
		if want := t0.Add(time.Duration(i) * 1500 * time.Microsecond); !r.ts.Equal(want) {
			t.Errorf("record %d: timestamp %v, want %v", i, r.ts, want)
		}
		enc, udp, err := wire.ParseEncap(r.data)
		if err != nil {
			t.Fatalf("record %d: ParseEncap: %v", i, err)
		}
		if enc != sent[i] {
			t.Errorf("record %d: Encap %+v, want %+v", i, enc, sent[i])
		}
		if err := wire.CheckICRC(&enc, udp); err != nil {
			t.Errorf("record %d: %v", i, err)
		}
		var p wire.Packet
		if err := wire.Parse(udp, &p); err != nil || p.PSN() != wire.PSN(i+1) {
			t.Errorf("record %d: Parse = %v, PSN %d", i, err, p.PSN())
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestPcapWriteError(t *testing.T) {
	w := &failWriter{}
	f, _, a, b := pair(t, Config{Pcap: w})
	sendSeq(t, a, addrB, 100) // the capture fails; delivery does not
	if got := queued(b); got != 100 {
		t.Errorf("delivered %d, want 100", got)
	}
	if err := f.Flush(); err == nil {
		t.Error("Flush succeeded on a failing writer")
	}
	if err := f.Close(); err == nil {
		t.Error("Close did not report the pcap error")
	}
	if w.n != 1 {
		t.Errorf("%d writes after the first failure, want none", w.n-1)
	}
}
