package transport

import (
	"errors"
	"fmt"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// fakeSQ is a send queue of size slots behind the shared post path; WRs
// whose WRID is 0 are refused by the check, and those whose WRID is 99
// fail to queue (an inline SGE gone since the check).
type fakeSQ struct {
	state   ibv.QPState
	size    int
	queued  []uint64
	flushed []uint64
	wakes   int // posts that asked for a run
}

func (q *fakeSQ) PostState() ibv.QPState { return q.state }
func (q *fakeSQ) Free() int              { return q.size - len(q.queued) }
func (q *fakeSQ) Size() int              { return q.size }
func (q *fakeSQ) FlushPosted() {
	q.flushed = append(q.flushed, q.queued...)
	q.queued = q.queued[:0]
}

func (q *fakeSQ) post(wrs []ibv.SendWR, all bool) (int, error) {
	p := SendPost{SQ: q, N: len(wrs), All: all}
	for p.Next() {
		switch p.Step {
		case CheckWR:
			if wrs[p.WR].WRID == 0 {
				p.Err = fmt.Errorf("%w: WRID 0", errno.Invalid)
			}
		case QueueWR:
			if wrs[p.WR].WRID == 99 {
				p.Err = fmt.Errorf("%w: inline data gone", errno.Invalid)
				break
			}
			q.queued = append(q.queued, wrs[p.WR].WRID)
		}
	}
	if PostRun(p.Posted, false) != RunNone {
		q.wakes++
	}
	return p.Posted, p.Err
}

func (q *fakeSQ) postAll(wrs []ibv.SendWR) error {
	_, err := q.post(wrs, true)
	return err
}

func wrsOf(ids ...uint64) []ibv.SendWR {
	wrs := make([]ibv.SendWR, len(ids))
	for i, id := range ids {
		wrs[i].WRID = id
	}
	return wrs
}

func TestSendPost(t *testing.T) {
	for _, s := range []ibv.QPState{ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR} {
		q := &fakeSQ{state: s, size: 4}
		if i, err := q.post(wrsOf(1), false); i != 0 || !errors.Is(err, ErrState) {
			t.Errorf("Post in %v: %d, %v; want 0 and ErrState", s, i, err)
		}
		if err := q.postAll(wrsOf(0)); !errors.Is(err, ErrState) {
			t.Errorf("PostAll in %v of a bad WR: %v; want ErrState first", s, err)
		}
	}

	q := &fakeSQ{state: ibv.QPStateRTS, size: 3}
	if i, err := q.post(wrsOf(1, 2, 0, 4), false); i != 2 || !errors.Is(err, errno.Invalid) {
		t.Errorf("Post with WR 2 bad: %d, %v; want 2 and errno.Invalid", i, err)
	}
	if i, err := q.post(wrsOf(3, 4), false); i != 1 || !errors.Is(err, errno.Full) {
		t.Errorf("Post past the queue: %d, %v; want 1 and errno.Full", i, err)
	}
	if len(q.queued) != 3 || q.wakes != 2 {
		t.Errorf("queued %v, %d runs; want 3 WRs and two posts that asked for a run", q.queued, q.wakes)
	}

	q = &fakeSQ{state: ibv.QPStateRTS, size: 2}
	err := q.postAll(wrsOf(1, 0))
	if !errors.Is(err, errno.Invalid) || err.Error() != "invalid argument: WR 1: WRID 0" || len(q.queued) != 0 {
		t.Errorf("PostAll with WR 1 bad: %v, queued %v; want EINVAL \"WR 1: WRID 0\" and none queued", err, q.queued)
	}
	if err := q.postAll(wrsOf(1, 2, 3)); !errors.Is(err, errno.Full) || len(q.queued) != 0 {
		t.Errorf("PostAll of 3 into 2: %v, queued %v; want errno.Full and none queued", err, q.queued)
	}
	if err := q.postAll(wrsOf(1, 2)); err != nil || len(q.queued) != 2 {
		t.Errorf("PostAll of 2 into 2: %v, queued %v", err, q.queued)
	}
	if q.wakes != 1 {
		t.Errorf("%d runs, want 1: a batch refused queues nothing", q.wakes)
	}

	q = &fakeSQ{state: ibv.QPStateRTS, size: 4}
	if i, err := q.post(wrsOf(1, 99, 3), false); i != 1 || !errors.Is(err, errno.Invalid) || len(q.queued) != 1 || q.wakes != 1 {
		t.Errorf("Post with WR 1 failing to queue: %d, %v, queued %v, %d runs; want 1, EINVAL, WR 0 queued and a run", i, err, q.queued, q.wakes)
	}

	// WRs posted in ERR or SQE are flushed as they are posted.
	for _, s := range []ibv.QPState{ibv.QPStateErr, ibv.QPStateSQE} {
		q := &fakeSQ{state: s, size: 1}
		if i, err := q.post(wrsOf(1, 2, 3), false); i != 3 || err != nil || len(q.flushed) != 3 {
			t.Errorf("Post in %v: %d, %v, flushed %v; want all 3 flushed", s, i, err, q.flushed)
		}
	}
	q = &fakeSQ{state: ibv.QPStateSQD, size: 2}
	if i, err := q.post(wrsOf(1), false); i != 1 || err != nil || len(q.flushed) != 0 {
		t.Errorf("Post in SQD: %d, %v, flushed %v; want queued, not flushed", i, err, q.flushed)
	}
}

func TestCheckSendCaps(t *testing.T) {
	c := ibv.QPCap{MaxSendSGE: 2, MaxInlineData: 8}
	sgl := []ibv.SGE{{Length: 5}, {Length: 4}}
	tests := []struct {
		name       string
		wr         ibv.SendWR
		inlineFree bool
		want       uint64
		err        error
	}{
		{"SGEs", ibv.SendWR{SGList: sgl}, false, 9, nil},
		{"too many SGEs", ibv.SendWR{SGList: append(sgl, ibv.SGE{})}, false, 0, errno.Invalid},
		{"inline SGEs over max_inline_data", ibv.SendWR{SGList: sgl, Flags: ibv.SendInline}, false, 0, errno.Invalid},
		{"inline bytes within", ibv.SendWR{InlineData: make([]byte, 8), Flags: ibv.SendInline}, false, 8, nil},
		{"inline bytes over", ibv.SendWR{InlineData: make([]byte, 9), Flags: ibv.SendInline}, false, 0, errno.Invalid},
		{"inline exempt", ibv.SendWR{SGList: sgl, Flags: ibv.SendInline}, true, 9, nil},
		{"inline data ignored without the flag", ibv.SendWR{SGList: sgl, InlineData: make([]byte, 1)}, false, 9, nil},
	}
	for _, tc := range tests {
		n, err := CheckSendCaps(&tc.wr, &c, tc.inlineFree)
		if n != tc.want || (tc.err == nil) != (err == nil) || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, n, err, tc.want, tc.err)
		}
	}
	if !Signaled(true, 0) || !Signaled(false, ibv.SendSignaled) || Signaled(false, ibv.SendInline) {
		t.Error("Signaled: sq_sig_all or IBV_SEND_SIGNALED")
	}
}

func TestPostRun(t *testing.T) {
	for _, tc := range []struct {
		posted int
		now    bool
		want   Run
	}{
		{0, false, RunNone},
		{0, true, RunNone},
		{1, false, RunLater},
		{3, true, RunNow},
	} {
		if got := PostRun(tc.posted, tc.now); got != tc.want {
			t.Errorf("PostRun(%d, %v) = %v, want %v", tc.posted, tc.now, got, tc.want)
		}
	}
}
