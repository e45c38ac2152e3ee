package pingpong

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/softnic/softnic/verbs"
)

// MsgSize is the size of one out-of-band address message, NUL included:
// sizeof "0000:000000:000000:00000000000000000000000000000000" in
// rdma-core's libibverbs/examples (rc_pingpong.c pp_client_exch_dest).
const MsgSize = 52

// Done is the message a client sends after reading the server's address
// ("done" and its NUL: write(sockfd, "done", sizeof "done")).
var Done = [5]byte{'d', 'o', 'n', 'e', 0}

// MaxQP is the number of address messages srq_pingpong exchanges each way
// whatever -q says (srq_pingpong.c MAX_QP); unused entries are all zero.
const MaxQP = 256

// Dest is one side's address as the pingpong examples exchange it
// (struct pingpong_dest): LID, QP number, first PSN and GID.
type Dest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID verbs.GID
}

// WireGID formats g as gid_to_wire_gid does (pingpong.c): the 16 bytes as
// 32 lower-case hex digits, in order, e.g.
// "00000000000000000000ffff0a4d0002" for ::ffff:10.77.0.2.
func WireGID(g verbs.GID) string { return hex.EncodeToString(g[:]) }

// ParseWireGID reads a GID written by gid_to_wire_gid. Like
// wire_gid_to_gid it reads four groups of eight hex digits; unlike it, it
// refuses anything else.
func ParseWireGID(s string) (verbs.GID, error) {
	var g verbs.GID
	if len(s) != 32 {
		return g, fmt.Errorf("GID %q is not 32 hex digits", s)
	}
	if _, err := hex.Decode(g[:], []byte(s)); err != nil {
		return g, fmt.Errorf("GID %q is not 32 hex digits", s)
	}
	return g, nil
}

// Marshal returns the 52-byte message sprintf("%04x:%06x:%06x:%s") writes
// for d, NUL-terminated.
func (d Dest) Marshal() [MsgSize]byte {
	var b [MsgSize]byte
	copy(b[:], fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xffffff, d.PSN&0xffffff, WireGID(d.GID)))
	return b
}

// ErrFormat reports an out-of-band message that is not a pingpong address
// message, with a guess at what the peer is.
type ErrFormat struct {
	Got  []byte // the bytes received (at most the first message's worth)
	Hint string // what the peer probably is, or ""
}

func (e *ErrFormat) Error() string {
	s := fmt.Sprintf("the peer's out-of-band message %q is not rdma-core's LID:QPN:PSN:GID address", printable(e.Got))
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// printable trims trailing NULs and quotes control bytes.
func printable(b []byte) string {
	return string(bytes.TrimRight(b, "\x00"))
}

// ParseDest parses a message made by Marshal or by rdma-core's
// sprintf("%04x:%06x:%06x:%s"). Like sscanf("%x:%x:%x:%s") it accepts hex
// fields of any width; it refuses a message that is not four
// colon-separated fields with a 32-digit GID.
func ParseDest(b []byte) (Dest, error) {
	var d Dest
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return d, &ErrFormat{Got: b, Hint: guessPeer(b)}
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil || f[i] == "" {
			return d, &ErrFormat{Got: b, Hint: guessPeer(b)}
		}
		v[i] = n
	}
	if v[0] > 0xffff || v[1] > 0xffffff || v[2] > 0xffffff {
		return d, &ErrFormat{Got: b, Hint: "a field is out of range"}
	}
	g, err := ParseWireGID(f[3])
	if err != nil {
		return d, &ErrFormat{Got: b, Hint: err.Error()}
	}
	return Dest{LID: uint16(v[0]), QPN: uint32(v[1]), PSN: uint32(v[2]), GID: g}, nil
}

// LooksLikeDest reports whether the first bytes of a message could start
// a pingpong address message ("xxxx:"), so a reader can give up on a peer
// speaking another protocol without waiting for 52 bytes that never come.
func LooksLikeDest(b []byte) bool {
	for i, c := range b {
		switch {
		case i == 4:
			if c != ':' {
				return false
			}
		case i < 4:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// guessPeer names the program that would send b.
func guessPeer(b []byte) string {
	// perftest's first message is its 16-byte version string ("6.06").
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' && bytes.IndexByte(b, '.') > 0 && bytes.IndexByte(b, '.') < 4 {
		return "it looks like a perftest version string: the peer is an ib_* perftest tool; use the softnic command of the same name (softnic write_bw, ...)"
	}
	return "is the peer another kind of program?"
}
