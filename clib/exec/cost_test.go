package exec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
)

// goCallCost measures, in this process over verbs, what testdata/bench.c
// measures through the C library (poll_empty, post_send, write_rtt), so
// that the difference is the C library's: the C-to-Go call and the
// conversion of the C structs. It returns bench.c's lines.
func goCallCost(t *testing.T, n int) string {
	t.Helper()
	lk, err := link.ListenUDP(link.UDPConfig{Addr: testAddr(2)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: lk})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	mr, err := pd.RegMR(buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(256, nil)
	if err != nil {
		t.Fatal(err)
	}
	var qps [2]*verbs.QP
	for i := range qps {
		if qps[i], err = pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range qps {
		if err := qps[i].Connect(qps[i].Endpoint(0), qps[1-i].Endpoint(0), nil); err != nil {
			t.Fatal(err)
		}
	}
	wc := make([]ibv.WorkCompletion, 1)
	wr := []ibv.SendWR{{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGList: []ibv.SGE{mr.SGE(0, 8)},
		RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}}
	pollOne := func() {
		for deadline := time.Now().Add(10 * time.Second); cq.Poll(wc) == 0; {
			if time.Now().After(deadline) {
				t.Fatal("no completion in 10 s")
			}
		}
		if wc[0].Status != ibv.WCSuccess {
			t.Fatalf("completion: %v", wc[0].Status)
		}
	}
	var b strings.Builder
	start := time.Now()
	for range n {
		if cq.Poll(wc) != 0 {
			t.Fatal("a completion on an idle CQ")
		}
	}
	fmt.Fprintf(&b, "poll_empty %d\n", time.Since(start).Nanoseconds()/int64(n))
	var posting time.Duration
	k := n / 32
	for range k {
		start = time.Now()
		for range 32 {
			if _, err := qps[0].PostSend(wr...); err != nil {
				t.Fatal(err)
			}
		}
		posting += time.Since(start)
		for range 32 {
			pollOne()
		}
	}
	fmt.Fprintf(&b, "post_send %d\n", posting.Nanoseconds()/int64(k*32))
	start = time.Now()
	for range n / 10 {
		if _, err := qps[0].PostSend(wr...); err != nil {
			t.Fatal(err)
		}
		pollOne()
	}
	fmt.Fprintf(&b, "write_rtt %d\n", time.Since(start).Nanoseconds()/int64(n/10))
	return b.String()
}
