package wire

import (
	"bytes"
	"flag"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized wire tests (0: derive from the clock)")

// NewTestRand returns a seeded generator and logs the seed so a failing run
// can be repeated with -seed. Exported for the package's external tests.
func NewTestRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("random seed %d (repeat with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

// randEncap returns an Encap of the given family with random covered and
// masked fields.
func randEncap(r *rand.Rand, v4 bool) Encap {
	var e Encap
	if v4 {
		e.Src = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		e.Dst = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		e.ID = uint16(r.Uint32())
		e.FragOff = IPv4DF
	} else {
		var a, b [16]byte
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		a[0], b[0] = 0x20, 0x20 // not IPv4-mapped
		e.Src, e.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
		e.FlowLabel = r.Uint32() & 0xFFFFF
	}
	e.SrcPort, e.DstPort = uint16(r.Uint32()), UDPPort
	e.TrafficClass, e.HopLimit, e.UDPChecksum = uint8(r.Uint32()), uint8(r.Uint32()), uint16(r.Uint32())
	return e
}

// randPacket builds a SEND_ONLY of n random payload bytes for e.
func randPacket(t testing.TB, r *rand.Rand, e *Encap, n int) []byte {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	h := Headers{BTH: BTHFields{Opcode: RCSendOnly, PKey: DefaultPKey,
		DestQP: r.Uint32() & QPNMask, PSN: PSN(r.Uint32() & PSNMask)}}
	b := make([]byte, MaxDatagram)
	k, err := Build(b, e, &h, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b[:k]
}

func TestCRCTables(t *testing.T) {
	crcInit()
	if !crcTables.ok {
		t.Fatal("top bytes of the IEEE table are not a permutation")
	}
	// pow8[k] must act like k zero bytes through the register.
	r := NewTestRand(t)
	for range 100 {
		v := r.Uint32()
		k := r.IntN(maxCRCZeros + 1)
		want := v
		for range k {
			want = crcZeroStep(want)
		}
		if got := crcShift(v, k); got != want {
			t.Fatalf("crcShift(%#x, %d) = %#x, want %#x", v, k, got, want)
		}
		if back := crcMul(crcTables.ipow8[k], want); back != v {
			t.Fatalf("x^-8k · x^8k · %#x = %#x", v, back)
		}
	}
	// crcRaw over p equals the standard CRC's difference with zeros.
	p := []byte("softnic")
	z := make([]byte, len(p))
	if got, want := crcRaw(p), crc32.ChecksumIEEE(p)^crc32.ChecksumIEEE(z); got != want {
		t.Fatalf("crcRaw = %#x, want %#x", got, want)
	}
}

func TestPatchICRC(t *testing.T) {
	r := NewTestRand(t)
	for i := range 2000 {
		v4 := i%2 == 0
		from := randEncap(r, v4)
		to := from
		switch r.IntN(4) {
		case 0:
			to.SrcPort = uint16(r.Uint32())
		case 1:
			to.ID = uint16(r.Uint32())
		case 2:
			to = randEncap(r, v4)
		case 3: // masked fields only
			to.TrafficClass, to.HopLimit, to.FlowLabel = uint8(r.Uint32()), uint8(r.Uint32()), r.Uint32()&0xFFFFF
		}
		pkt := randPacket(t, r, &from, r.IntN(4097))
		PatchICRC(pkt, &from, &to)
		if err := CheckICRC(&to, pkt); err != nil {
			t.Fatalf("case %d: after patching %+v -> %+v: %v", i, from, to, err)
		}
	}
}

func TestSolveIPv4ID(t *testing.T) {
	r := NewTestRand(t)
	for range 2000 {
		e := randEncap(r, true)
		pkt := randPacket(t, r, &e, r.IntN(4097))
		guess := e
		guess.ID = uint16(r.Uint32())
		if r.IntN(4) == 0 {
			guess.ID = e.ID
		}
		got := ComputeICRC(&guess, pkt)
		x, ok := SolveIPv4ID(got, StoredICRC(pkt), len(pkt))
		if !ok || guess.ID^x != e.ID {
			t.Fatalf("solve: ok %v, ID %#x, want %#x", ok, guess.ID^x, e.ID)
		}
	}
}

// TestSolveIPv4IDRejects checks that corrupted packets are refused except
// for the expected 2^-16 share.
func TestSolveIPv4IDRejects(t *testing.T) {
	r := NewTestRand(t)
	const n = 200000
	accepted := 0
	for range n {
		got, want := r.Uint32(), r.Uint32()
		if _, ok := SolveIPv4ID(got, want, 64+r.IntN(4000)); ok {
			accepted++
		}
	}
	// Expect n/65536 ≈ 3; anything above 20 means the check is broken.
	if accepted > 20 {
		t.Fatalf("%d of %d random ICRC mismatches accepted, want about %d", accepted, n, n>>16)
	}
	t.Logf("%d of %d random mismatches solvable (expected ≈ %d)", accepted, n, n>>16)
}

func BenchmarkPatchICRC(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	from := randEncap(r, true)
	to := from
	to.SrcPort, to.ID = UDPPort, 3
	pkt := randPacket(b, r, &from, 4096)
	b.ReportAllocs()
	for b.Loop() {
		PatchICRC(pkt, &from, &to)
		from, to = to, from
	}
}

func BenchmarkSolveIPv4ID(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	e := randEncap(r, true)
	pkt := randPacket(b, r, &e, 4096)
	g := e
	g.ID = 0
	got, want := ComputeICRC(&g, pkt), StoredICRC(pkt)
	b.ReportAllocs()
	for b.Loop() {
		SolveIPv4ID(got, want, len(pkt))
	}
}

// pickPayloadCRC takes the faster of two CRCs, the first on a tie: here
// one does the other's work a hundred times over, a margin no scheduler
// noise closes.
func TestPickPayloadCRC(t *testing.T) {
	var sink uint32
	slow := func(crc uint32, p []byte) uint32 {
		for range 100 {
			sink ^= crc32.Update(crc, crc32.IEEETable, p)
		}
		return crcLib(crc, p)
	}
	same := func(a, b func(uint32, []byte) uint32) bool {
		return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	if got := pickPayloadCRC(slow, crcLib); !same(got, crcLib) {
		t.Error("picked the slower second")
	}
	if got := pickPayloadCRC(crcLib, slow); !same(got, crcLib) {
		t.Error("picked the slower first")
	}
	if !same(payloadCRC, crcLib) && !same(payloadCRC, crcSlicing) {
		t.Error("the package's payload CRC is neither")
	}
}

// crcUpdate, eight bytes a step, runs the register as hash/crc32 does a
// byte a step, for every length around the steps and every alignment.
func TestCRCUpdateMatchesCRC32(t *testing.T) {
	r := NewTestRand(t)
	buf := make([]byte, 200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for off := range 8 {
		for n := 0; off+n <= len(buf); n++ {
			p := buf[off : off+n]
			seed := r.Uint32()
			if got, want := crcSmall(seed, p), crc32.Update(seed, crc32.IEEETable, p); got != want {
				t.Fatalf("crcSmall(%#x, %d bytes at %d) = %#x, hash/crc32 %#x", seed, n, off, got, want)
			}
			if got, want := crcRaw(p), ^crc32.Update(^uint32(0), crc32.IEEETable, p); got != want {
				t.Fatalf("crcRaw(%d bytes at %d) = %#x, want %#x", n, off, got, want)
			}
		}
	}
}

// IDPatch gives PatchICRC's result for an identification change, on one
// IDPatch reused across lengths and changes.
func TestIDPatch(t *testing.T) {
	r := NewTestRand(t)
	var d IDPatch
	for i := range 3000 {
		from := randEncap(r, true)
		to := from
		to.ID = uint16(r.Uint32())
		if i%3 == 0 {
			to.ID = from.ID ^ uint16(r.IntN(64)) // a GSO segment's
		}
		n := r.IntN(4097)
		if i%5 != 0 && d.n >= BTHLen+ICRCLen {
			n = d.n - BTHLen - ICRCLen // the same length again: the cached basis
		}
		pkt := randPacket(t, r, &from, n)
		want := append([]byte(nil), pkt...)
		PatchICRC(want, &from, &to)
		d.Patch(pkt, from.ID^to.ID)
		if !bytes.Equal(pkt, want) {
			t.Fatalf("case %d: %d bytes, ID %#x -> %#x: ICRC %#x, PatchICRC %#x", i, len(pkt), from.ID, to.ID,
				StoredICRC(pkt), StoredICRC(want))
		}
		if err := CheckICRC(&to, pkt); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}

// The ...At forms patch an ICRC given apart from its packet, as the UDP
// link patches a datagram whose payload is elsewhere
// (link.Datagram.Payload): the same bytes as the forms over the whole
// packet.
func TestPatchAt(t *testing.T) {
	r := NewTestRand(t)
	var d, dAt IDPatch
	for i := range 2000 {
		v4 := i%4 != 0
		from := randEncap(r, v4)
		to := from
		to.ID = uint16(r.IntN(64))
		if r.IntN(2) == 0 {
			to = randEncap(r, v4)
		}
		pkt := randPacket(t, r, &from, r.IntN(4097))
		icrc := func() []byte { return append([]byte(nil), pkt[len(pkt)-ICRCLen:]...) }

		want, got := append([]byte(nil), pkt...), icrc()
		PatchICRC(want, &from, &to)
		PatchICRCAt(got, len(pkt), &from, &to)
		if StoredICRC(want) != StoredICRC(got) {
			t.Fatalf("case %d: PatchICRCAt %#x, PatchICRC %#x", i, StoredICRC(got), StoredICRC(want))
		}
		want, got = append([]byte(nil), pkt...), icrc()
		d.PatchEncap(want, &from, &to)
		dAt.PatchEncapAt(got, len(pkt), &from, &to)
		if StoredICRC(want) != StoredICRC(got) {
			t.Fatalf("case %d: PatchEncapAt %#x, PatchEncap %#x", i, StoredICRC(got), StoredICRC(want))
		}
		if err := CheckICRC(&to, want); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}

func BenchmarkIDPatch(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	e := randEncap(r, true)
	pkt := randPacket(b, r, &e, 64)
	var d IDPatch
	for i := 0; b.Loop(); i++ {
		d.Patch(pkt, uint16(i%63+1))
	}
}

// PatchEncap gives PatchICRC's result whatever differs: through Patch
// when only the identification does, through PatchICRC otherwise.
func TestIDPatchEncap(t *testing.T) {
	r := NewTestRand(t)
	var d IDPatch
	for i := range 2000 {
		v4 := i%4 != 0
		from := randEncap(r, v4)
		to := from
		switch r.IntN(3) {
		case 0:
			to.ID = uint16(r.IntN(64))
		case 1:
			to = randEncap(r, v4)
		case 2:
			to.ID, to.SrcPort = uint16(r.Uint32()), uint16(r.Uint32())
		}
		pkt := randPacket(t, r, &from, r.IntN(4097))
		want := append([]byte(nil), pkt...)
		PatchICRC(want, &from, &to)
		d.PatchEncap(pkt, &from, &to)
		if !bytes.Equal(pkt, want) {
			t.Fatalf("case %d: %+v -> %+v: ICRC %#x, PatchICRC %#x", i, from, to, StoredICRC(pkt), StoredICRC(want))
		}
	}
}
