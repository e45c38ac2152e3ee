package cq

import (
	"errors"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// TestModerate: an armed CQ with moderation generates its event at the
// count-th completion, or once the period started by the first one ends,
// whichever comes first; without moderation, at the first (ibv_modify_cq).
func TestModerate(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	for _, tc := range []struct {
		name   string
		count  int
		period time.Duration
		pushes int           // completions pushed at once
		after  time.Duration // then the clock advances
		want   []int         // events after each push, then after the advance
	}{
		{"none", 0, 0, 3, 0, []int{1, 1, 1, 1}},
		{"count 3", 3, 0, 4, time.Hour, []int{0, 0, 1, 1, 1}},
		{"count 3 period", 3, 100 * time.Microsecond, 2, 100 * time.Microsecond, []int{0, 0, 1}},
		{"count 3 period early", 3, 100 * time.Microsecond, 2, 99 * time.Microsecond, []int{0, 0, 0}},
		{"period only", 0, 50 * time.Microsecond, 5, 50 * time.Microsecond, []int{0, 0, 0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCQ(t, 16)
			events := 0
			c.SetNotifier(func() { events++ })
			if err := c.Moderate(tc.count, tc.period, clk); err != nil {
				t.Fatal(err)
			}
			if err := c.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			var got []int
			for i := range tc.pushes {
				c.Push(wc(uint64(i)), false)
				got = append(got, events)
			}
			clk.Advance(tc.after)
			got = append(got, events)
			if len(got) != len(tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("events after each step %v, want %v", got, tc.want)
				}
			}
		})
	}
	c := newCQ(t, 4)
	for _, bad := range []struct {
		count  int
		period time.Duration
	}{{MaxModCount + 1, 0}, {0, MaxModPeriod + time.Microsecond}, {-1, 0}} {
		if err := c.Moderate(bad.count, bad.period, clk); !errors.Is(err, errno.Invalid) {
			t.Errorf("Moderate(%d, %v) = %v, want EINVAL", bad.count, bad.period, err)
		}
	}
}

// TestPollStamped: a CQ told to stamp records each completion's time of
// Push, kept across Resize.
func TestPollStamped(t *testing.T) {
	clk := clock.NewManual(time.Unix(1000, 0))
	c := newCQ(t, 4)
	c.Push(wc(1), false)
	c.Stamp(clk)
	clk.Advance(time.Second)
	c.Push(wc(2), false)
	if err := c.Resize(8); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	c.Push(wc(3), false)
	out := make([]ibv.WorkCompletion, 4)
	stamps := make([]int64, 4)
	n := c.PollStamped(out, stamps)
	want := []int64{0, time.Unix(1001, 0).UnixNano(), time.Unix(1002, 0).UnixNano()}
	if n != 3 {
		t.Fatalf("polled %d, want 3", n)
	}
	for i := range n {
		if out[i].WRID != uint64(i+1) || stamps[i] != want[i] {
			t.Errorf("completion %d: WR %d at %d, want WR %d at %d", i, out[i].WRID, stamps[i], i+1, want[i])
		}
	}
}
