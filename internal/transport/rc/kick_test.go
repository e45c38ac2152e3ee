package rc_test

import (
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
)

// A one-packet post to an idle send queue is sent on the posting
// goroutine (RunNow), unless the queue's last busy spell took
// rc.StreamPosts posts or more: a stream, whose next posts join this one
// on the processor (RunLater). A spell of one post (a ping-pong's turn)
// brings the at-once send back.
func TestPostToIdleQueueAfterStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		for i := range 2*rc.StreamPosts + 4 {
			b.postRecv(recvWR(b, uint64(i), 0, 64))
		}
		wrid := uint64(0)
		post := func(want transport.Run, what string) {
			t.Helper()
			wrid++
			if got := a.postRun(sendWR(a, wrid, ibv.WRSend, 0, 64)); got != want {
				t.Errorf("%s: post %d asked for %v, want %v", what, wrid, got, want)
			}
		}
		post(transport.RunNow, "the first post")
		a.waitWC(1)
		// A stream: every post but the first joins a busy queue.
		post(transport.RunNow, "a post after a spell of one")
		for range rc.StreamPosts - 1 {
			post(transport.RunLater, "a post to a busy queue")
		}
		a.waitWC(rc.StreamPosts)
		post(transport.RunLater, "the first post after a stream")
		a.waitWC(1)
		post(transport.RunNow, "a post after a spell of one")
		a.waitWC(1)
	})
}
