package perftest

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseText reads the result table a perftest tool prints on standard
// output — perftest's own ib_* tools, or softnic's look-alikes without
// --json — for the programs that run perftest's tools and have no --json
// to read (scripts/bench's guest mode runs ib_*_bw and ib_write_lat over
// rxe). It returns a Result with MTU (the test info block's " Mtu : N[B]"
// line, 0 without one), and BW or Lat: one entry per result row, each
// row being the line under a column title (resultFmt, resultFmtG,
// resultFmtLat, resultFmtLatDu: perftest_parameters.h's RESULT_FMT*),
// up to the next resultLine. Bandwidths are converted to MB/sec as in
// Result; latencies are in microseconds (a -C run's cycles cannot be
// told from them and are not supported). Lines that are not rows in a
// table's block, such as warnings on a merged standard error, are
// skipped; a table without any row is an error, and so is output
// without a table.
func ParseText(out []byte) (Result, error) {
	var r Result
	type block int
	const (
		none block = iota
		bw
		bwG
		lat
		latDur
	)
	titles := map[string]block{
		strings.TrimSpace(resultFmt):      bw,
		strings.TrimSpace(resultFmtG):     bwG,
		strings.TrimSpace(resultFmtLat):   lat,
		strings.TrimSpace(resultFmtLatDu): latDur,
	}
	sep := strings.TrimSpace(resultLine)
	in, rows, tables := none, 0, 0
	end := func() error {
		if in != none && rows == 0 {
			return fmt.Errorf("perftest table without a result row")
		}
		in, rows = none, 0
		return nil
	}
	for _, l := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(l)
		if b, ok := titles[t]; ok {
			// -H prints the column titles again after its histogram:
			// still the same table
			if in != b {
				if err := end(); err != nil {
					return r, err
				}
				in = b
				tables++
			}
			continue
		}
		if t == sep {
			// a table ends at the line under its rows; -H prints one
			// between its histogram and the repeated column titles
			if rows > 0 {
				in, rows = none, 0
			}
			continue
		}
		if in == none {
			if k, v, ok := strings.Cut(t, ":"); ok && strings.TrimSpace(k) == "Mtu" {
				if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), "[B]")); err == nil {
					r.MTU = n
				}
			}
			continue
		}
		f := strings.Fields(t)
		want := map[block]int{bw: 5, bwG: 5, lat: 9, latDur: 4}[in]
		if len(f) != want {
			continue
		}
		var ints [2]uint64
		var nums []float64
		ok := true
		for i, s := range f {
			if i < 2 {
				v, err := strconv.ParseUint(s, 10, 64)
				ints[i], ok = v, ok && err == nil
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			nums, ok = append(nums, v), ok && err == nil
		}
		if !ok {
			continue
		}
		rows++
		switch in {
		case bw, bwG:
			res := BWResult{Size: ints[0], Iters: ints[1], BWPeak: nums[0], BWAvg: nums[1], MsgRate: nums[2], Gbits: in == bwG}
			r.BW = append(r.BW, res.inMBps())
		case lat:
			r.Lat = append(r.Lat, LatResult{Size: ints[0], Iters: ints[1], Min: nums[0], Max: nums[1],
				Typical: nums[2], Avg: nums[3], Stdev: nums[4], P99: nums[5], P999: nums[6]})
		case latDur:
			r.Lat = append(r.Lat, LatResult{Size: ints[0], Iters: ints[1], Avg: nums[0], TPS: nums[1], Duration: true})
		}
	}
	if err := end(); err != nil {
		return r, err
	}
	if tables == 0 {
		return r, fmt.Errorf("no perftest result table in the output")
	}
	return r, nil
}
