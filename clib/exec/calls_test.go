package exec

import (
	"strings"
	"testing"
)

// The calls the library passes to verbs beyond the data path, from C
// (testdata/calls.c): CQ moderation, completion timestamps against the
// device clock, thread and parent domains and what holds them, MR
// re-registration and advice, the P_Key and GID tables, each with the
// errno libibverbs gives for what it refuses; and an extended QP's
// ibv_wr_start batch, which another thread's ibv_post_send waits for and
// its own thread's is refused with EBUSY.
func TestVerbsCalls(t *testing.T) {
	prog := cprog(t, "calls")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog)))
}

// ibv_post_recv from C (testdata/recvs.c), which the library stages in
// memory of its own or passes to the engine by the receive's shape: the
// receives complete in posting order either way, a full queue refuses the
// next with ENOMEM at exactly max_recv_wr, ERR flushes them in order and
// what is posted to it, RESET refuses posts and empties the queue, and two
// threads posting at once fill it exactly.
func TestPostRecvStaged(t *testing.T) {
	prog := cprog(t, "recvs")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog)))
}
