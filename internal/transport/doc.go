// Package transport is the plumbing softnic's transports share, below
// package rc (RC, UC and XRC) and package ud: a QP's receive queue
// (RecvQueue) and inbox of received packets (Inbox, RxPacket), the
// Output a pass builds its packets into, the ibv_post_send rules every
// QP type follows (SendPost), the QP state machine of ibv_modify_qp
// (CheckModify), the asynchronous events a QP raises (EventQueue) and
// the NIC's counters.
//
// It also says how a transport and the engine that runs it (package nic)
// talk. The engine hands a transport its received packets and makes its
// passes; the transport never runs itself. After an application's call
// (a post, a modify) it tells the engine what to run (Run: nothing, a
// pass now on the calling goroutine, a pass later on the QP's
// processor), and a timer that fires asks for a pass through the Waker
// the transport was made with.
package transport
