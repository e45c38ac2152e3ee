package pingpong

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/verbs"
)

// AddressLine formats the "  local address:" or "  remote address:" line
// the examples print. ud_pingpong's local line has ": GID" where the
// others have ", GID" (ud_pingpong.c), and softnic keeps that.
func AddressLine(local bool, d Dest, udLocal bool) string {
	sep := ","
	if udLocal {
		sep = ":"
	}
	side := "  local address: "
	if !local {
		side = "  remote address:"
	}
	return fmt.Sprintf("%s LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", side, d.LID, d.QPN, d.PSN, sep, InetNtop6(d.GID))
}

// InetNtop6 formats a GID as glibc's inet_ntop(AF_INET6) does: the
// longest run of two or more zero groups (the first of equal runs) becomes
// "::", and an IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d)
// address ends in a dotted quad.
func InetNtop6(g verbs.GID) string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(g[2*i])<<8 | uint16(g[2*i+1])
	}
	base, n := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > n {
			base, n = i, j-i
		}
		i = j
	}
	if n < 2 {
		base = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if base >= 0 && i >= base && i < base+n {
			if i == base {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && base == 0 && (n == 6 || (n == 5 && w[5] == 0xffff)) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return b.String()
		}
		fmt.Fprintf(&b, "%x", w[i])
	}
	if base >= 0 && base+n == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// Usec returns elapsed as the examples measure it: the microseconds of two
// gettimeofday readings held in a C float.
func Usec(elapsed time.Duration) float32 { return float32(elapsed.Microseconds()) }

// ResultLines formats the two result lines of a run of iters exchanges of
// size bytes that took usec microseconds, with the examples' arithmetic
// (bytes = size*iters*2; "float usec", so usec/iters is a float division):
//
//	"%lld bytes in %.2f seconds = %.2f Mbit/sec\n"
//	"%d iters in %.2f seconds = %.2f usec/iter\n"
func ResultLines(size, iters int, usec float32) string {
	bytes := int64(size) * int64(iters) * 2
	secs := float64(usec) / 1000000.
	return fmt.Sprintf("%d bytes in %s seconds = %s Mbit/sec\n", bytes, F2(secs), F2(float64(bytes)*8./float64(usec))) +
		fmt.Sprintf("%d iters in %s seconds = %s usec/iter\n", iters, F2(secs), F2(float64(usec/float32(iters))))
}

// F2 formats v as C's printf("%.2f") does, "inf" and "nan" included.
func F2(v float64) string { return CFloat(v, 2) }

// CFloat formats v as C's printf("%.<prec>f") does, "inf" and "nan"
// included.
func CFloat(v float64, prec int) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "-nan" // glibc prints 0.0/0.0 (negative NaN) so
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// InvalidPageLine is what -c prints for a page whose data did not survive
// the round trip.
func InvalidPageLine(page int) string { return fmt.Sprintf("invalid data in page %d\n", page) }
