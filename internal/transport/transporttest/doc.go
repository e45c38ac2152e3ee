// Package transporttest is the test kit of softnic's transports: a
// deterministic network of nodes on the fabric and a manual clock that
// drives transport QPs the way the engine does, a recorder of what goes
// on the wire, a packet checker in the style of gVisor's
// pkg/tcpip/checker, and a completion queue that keeps what it is given
// (STYLE.md 16, 17).
//
// A [Net] is a fabric.Fabric on a clock.Manual and the [Node]s attached
// to it. A node stands for a NIC: it owns the counters its QPs share and
// routes the datagrams its fabric endpoint receives through the checks
// package nic makes before a QP sees a packet (wire.Parse, the ICRC, the
// destination address, the P_Key, the QPN and the opcode's class; nic
// engine.go receive), then delivers them to the QP bound to the
// destination [Port] and runs its Process. Everything runs on the test's
// goroutine: [Net.Settle] runs every node until no packet is in flight
// and no QP has work, [Net.Run] and [Net.RunUntil] move the manual clock
// from one timer to the next (the QPs' retransmit and RNR timers, the
// fabric's delays) and settle after each. A test is therefore exact:
// "lose the third WRITE_MIDDLE, expect a sequence NAK and a go-back-N
// resend from PSN 3" asserts the packets in the order they were sent and
// the fake time each left at.
//
// The kit knows no transport: a QP is a [Handler] (Deliver, Process,
// Close), the packets are wire.Packets and the completions
// ibv.WorkCompletions. Each transport's tests build their QPs in one
// harness file of their own (internal/transport/rc and ud,
// harness_test.go) and bind them to ports.
//
// A Net must be made inside a testing/synctest bubble (synctest.Test),
// which fails the test if a goroutine outlives it: the kit starts none,
// so the check is on the transports. At the end of the test the Net
// closes every bound QP and the fabric and fails if a timer is still
// armed on the clock.
package transporttest
