package verbs_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestCompChannelReady: Ready holds a value once an event is queued, and
// GetEventTimeout with no time then takes it; a select loop so waits on
// the channel (softnic's C libibverbs signals the program's fd so).
func TestCompChannelReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{ch: true})
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 64)}}))
		must(t, b.rcq.ReqNotify(false))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 16)}}))
		select {
		case <-b.ch.Ready():
		case <-time.After(time.Second):
			t.Fatal("Ready holds nothing a second after the completion")
		}
		c, err := b.ch.GetEventTimeout(context.Background(), 0)
		if err != nil || c != b.rcq {
			t.Fatalf("GetEventTimeout(0) after Ready = %p, %v; want the receive CQ", c, err)
		}
		must(t, c.AckEvents(1))
		select {
		case <-b.ch.Ready():
			t.Error("Ready holds a value with no event queued")
		default:
		}
		if (*verbs.CompChannel)(nil).Ready() != nil {
			t.Error("Ready of a nil channel is not nil")
		}
	})
}
