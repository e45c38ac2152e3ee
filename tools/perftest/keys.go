package perftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The out-of-band messages of perftest 4.5 (perftest_communication.c),
// exchanged over TCP port 18515 by every test before and after it runs.

// Key message sizes, NUL included: KEY_MSG_SIZE (no GID, for InfiniBand
// without a GRH) and KEY_MSG_SIZE_GID (every RoCE run: the GID index is
// always set on an Ethernet link).
const (
	KeyMsgSize    = 59
	KeyMsgSizeGID = 108
)

// VersionSize is the size of the version string each side sends first
// (MAX_VERSION).
const VersionSize = 16

// Version is the perftest version softnic speaks: perftest 4.5-0.17's
// internal version (configure.ac AC_INIT), the one Debian 12 ships. Newer
// perftests see it and keep to the protocol it knows (their
// negotiate_params step starts at 6.28).
const Version = "6.06"

// Dest is one QP's address as perftest exchanges it (struct
// pingpong_dest): LID, outstanding reads, QPN, PSN, rkey and the address
// of the peer-writable half of the buffer, GID, and an SRQ number (XRC
// and DC only).
type Dest struct {
	LID      uint16
	OutReads uint32
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      verbs.GID
	SRQN     uint32
}

// MarshalKeys formats d as ethernet_write_keys does: with the GID (the
// 108-byte "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16×"%02x:" + "%08x:"
// form, KEY_PRINT_FMT_GID) or without it (the 59-byte KEY_PRINT_FMT),
// NUL-padded to the message size.
func MarshalKeys(d Dest, withGID bool) []byte {
	var s string
	size := KeyMsgSize
	if withGID {
		size = KeyMsgSizeGID
		var g strings.Builder
		for _, b := range d.GID {
			fmt.Fprintf(&g, "%02x:", b)
		}
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%s%08x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, g.String(), d.SRQN)
	} else {
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, d.SRQN)
	}
	b := make([]byte, size)
	copy(b, s)
	return b
}

// ErrFormat reports a message that is not what perftest sends at that
// point, with a guess at what the peer is.
type ErrFormat struct {
	What string // "version", "keys", ...
	Got  []byte
	Hint string
}

func (e *ErrFormat) Error() string {
	s := fmt.Sprintf("the peer's %s message %q is not perftest's", e.What, string(bytes.TrimRight(e.Got, "\x00")))
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// ParseKeys parses a key message in either form; withGID says which the
// reader expects (perftest reads the form of its own GID index).
func ParseKeys(b []byte, withGID bool) (Dest, error) {
	var d Dest
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	want := 7
	if withGID {
		want = 6 + 16 + 2 // ... GID bytes, SRQN, and the empty field after the final ':'
	}
	if len(f) != want || (withGID && f[want-1] != "") {
		return d, &ErrFormat{What: "keys", Got: b, Hint: guessPeer(b)}
	}
	widths := []int{16, 16, 24, 24, 32, 64}
	var v [6]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, widths[i])
		if err != nil {
			return d, &ErrFormat{What: "keys", Got: b, Hint: guessPeer(b)}
		}
		v[i] = n
	}
	d = Dest{LID: uint16(v[0]), OutReads: uint32(v[1]), QPN: uint32(v[2]), PSN: uint32(v[3]), RKey: uint32(v[4]), VAddr: v[5]}
	srqField := 6
	if withGID {
		for i := 0; i < 16; i++ {
			n, err := strconv.ParseUint(f[6+i], 16, 8)
			if err != nil {
				return d, &ErrFormat{What: "keys", Got: b, Hint: "bad GID byte"}
			}
			d.GID[i] = byte(n)
		}
		srqField = 22
	}
	n, err := strconv.ParseUint(f[srqField], 16, 32)
	if err != nil {
		return d, &ErrFormat{What: "keys", Got: b, Hint: "bad SRQ number"}
	}
	d.SRQN = uint32(n)
	return d, nil
}

// guessPeer names the program that would send b.
func guessPeer(b []byte) string {
	if len(b) >= 5 && b[4] == ':' && !bytes.Contains(b[:min(len(b), 20)], []byte(".")) {
		f := strings.Split(string(bytes.TrimRight(b, "\x00")), ":")
		if len(f) == 4 && len(f[3]) == 32 {
			return "it is an rdma-core pingpong address (LID:QPN:PSN:GID): the peer is an ibv_*_pingpong; use softnic rc_pingpong and friends"
		}
		if len(f) >= 2 && len(f[1]) == 6 {
			return "it looks like an rdma-core pingpong address: the peer is an ibv_*_pingpong; use softnic rc_pingpong and friends"
		}
	}
	return "is the peer the perftest tool of the same name?"
}

// MarshalVersion returns the 16-byte version message (strncpy into
// char version[MAX_VERSION]).
func MarshalVersion(v string) []byte {
	b := make([]byte, VersionSize)
	copy(b[:VersionSize-1], v)
	return b
}

// ParseVersion reads the peer's version message as atof would, refusing
// one that does not start with a number.
func ParseVersion(b []byte) (string, float64, error) {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if len(s) > 4 && s[4] == ':' {
		return s, 0, &ErrFormat{What: "version", Got: b, Hint: guessPeer(b)}
	}
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '.') {
		n++
	}
	v, err := strconv.ParseFloat(s[:n], 64)
	if err != nil || n == 0 {
		return s, 0, &ErrFormat{What: "version", Got: b, Hint: guessPeer(b)}
	}
	return s, v, nil
}

// VersionAtLeast compares versions as perftest does: atof(version) >= v.
// (Every gate on the peer's version is below 5.70, the oldest version
// perftest 4.5 talks to at all.)
func VersionAtLeast(ver float64, v float64) bool { return ver >= v }

// MinPeerVersion is the oldest peer perftest 4.5 accepts
// (check_version_compatibility).
const MinPeerVersion = 5.70

// Int32 encodes v as hton_int does (4 bytes, network order).
func Int32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// ParseInt32 decodes ntoh_int.
func ParseInt32(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

// MTUMessage returns check_mtu's message: the MTU enum as "%d" in
// char[2] ("3\0" for 1024), or, for a peer before 5.31, in 4 bytes.
func MTUMessage(mtu ibv.MTU, peerVersion float64) []byte {
	n := 4
	if VersionAtLeast(peerVersion, 5.31) {
		n = 2
	}
	b := make([]byte, n)
	copy(b, strconv.Itoa(int(mtu)))
	return b
}

// ParseMTUMessage reads the peer's MTU enum (strtol); 0 when invalid.
func ParseMTUMessage(b []byte) ibv.MTU {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < int(ibv.MTU256) || v > int(ibv.MTU4096) {
		return 0
	}
	return ibv.MTU(v)
}

// Report is struct bw_report_data as xchg_bw_reports exchanges it.
type Report struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64
	BWAvg   float64
	MsgRate float64
}

// ReportMessages returns the messages xchg_bw_reports sends for r, in
// order: size (8 bytes), iterations (8 bytes for a peer of 5.33 or later,
// else 4), peak and average bandwidth and message rate (8-byte doubles),
// all in network byte order (hton_long, hton_int, hton_double on a
// little-endian 64-bit host).
func ReportMessages(r Report, peerVersion float64) [][]byte {
	be := binary.BigEndian
	iters := be.AppendUint32(nil, uint32(r.Iters))
	if VersionAtLeast(peerVersion, 5.33) {
		iters = be.AppendUint64(nil, r.Iters)
	}
	return [][]byte{
		be.AppendUint64(nil, r.Size), iters,
		be.AppendUint64(nil, math.Float64bits(r.BWPeak)),
		be.AppendUint64(nil, math.Float64bits(r.BWAvg)),
		be.AppendUint64(nil, math.Float64bits(r.MsgRate)),
	}
}

// ReportSizes are the sizes of ReportMessages' messages.
func ReportSizes(peerVersion float64) []int {
	it := 4
	if VersionAtLeast(peerVersion, 5.33) {
		it = 8
	}
	return []int{8, it, 8, 8, 8}
}

// ParseReport decodes the messages ReportMessages makes.
func ParseReport(m [][]byte) Report {
	be := binary.BigEndian
	r := Report{Size: be.Uint64(m[0])}
	if len(m[1]) == 8 {
		r.Iters = be.Uint64(m[1])
	} else {
		r.Iters = uint64(be.Uint32(m[1]))
	}
	r.BWPeak = math.Float64frombits(be.Uint64(m[2]))
	r.BWAvg = math.Float64frombits(be.Uint64(m[3]))
	r.MsgRate = math.Float64frombits(be.Uint64(m[4]))
	return r
}

// RDMAKeySize is sizeof(struct pingpong_dest) in perftest 4.5 on a 64-bit
// host: int lid, out_reads, qpn, psn; unsigned rkey; 4 bytes of padding;
// unsigned long long vaddr; union ibv_gid gid; unsigned srqn; int
// gid_index. With -R/-z the key messages are that struct, SENT on the
// rdma_cm connection (rdma_write_keys).
const RDMAKeySize = 56

// MarshalRDMAKeys formats d as rdma_write_keys does with HAVE_ENDIAN (every
// Linux build): each integer big-endian, the GID as is, the padding zero.
// gidIndex is the struct's gid_index, which perftest fills in but never
// reads from the peer.
func MarshalRDMAKeys(d Dest, gidIndex int) []byte {
	b := make([]byte, RDMAKeySize)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.LID))
	be.PutUint32(b[4:], d.OutReads)
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	be.PutUint32(b[52:], uint32(int32(gidIndex)))
	return b
}

// ParseRDMAKeys reads a struct pingpong_dest as rdma_read_keys does. A
// message of another size is an error (not perftest 4.5's struct).
func ParseRDMAKeys(b []byte) (Dest, error) {
	if len(b) != RDMAKeySize {
		return Dest{}, &ErrFormat{What: "keys", Got: b,
			Hint: fmt.Sprintf("a %d-byte message, not perftest 4.5's %d-byte struct pingpong_dest", len(b), RDMAKeySize)}
	}
	be := binary.BigEndian
	d := Dest{LID: uint16(be.Uint32(b[0:])), OutReads: be.Uint32(b[4:]), QPN: be.Uint32(b[8:]),
		PSN: be.Uint32(b[12:]), RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[48:])}
	copy(d.GID[:], b[32:48])
	return d, nil
}
