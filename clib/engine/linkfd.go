package main

import "github.com/softnic/softnic/link"

// linkFD returns the descriptor of the UDP socket the device's link
// receives on (link.UDPLink.PollFD), or -1 when the link is no UDP
// socket. The C library's ibv_poll_cq waits for it to turn readable
// (poll(2)) once a CQ has stayed empty for a while (clib/libibverbs/cq.c:
// idle); it never reads it.
func linkFD(l link.Link) int {
	for {
		u, ok := l.(link.Unwrapper)
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	u, ok := l.(*link.UDPLink)
	if !ok {
		return -1
	}
	return u.PollFD()
}
