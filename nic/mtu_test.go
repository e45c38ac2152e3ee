package nic

import (
	"testing"

	"github.com/softnic/softnic/transport"
)

// TestActiveMTU checks ActiveMTU against rxe_set_mtu at each threshold
// (an IB MTU plus RXE_MAX_HDR_LENGTH, 80) and around it.
func TestActiveMTU(t *testing.T) {
	for _, c := range []struct {
		netdev int
		want   transport.MTU
	}{
		{0, transport.MTU256}, {68, transport.MTU256}, // below 256+80: "mtu ? ... : IB_MTU_256"
		{335, transport.MTU256}, {336, transport.MTU256},
		{591, transport.MTU256}, {592, transport.MTU512},
		{1103, transport.MTU512}, {1104, transport.MTU1024},
		{1500, transport.MTU1024},
		{2127, transport.MTU1024}, {2128, transport.MTU2048},
		{4175, transport.MTU2048}, {4176, transport.MTU4096},
		{9000, transport.MTU4096}, {65536, transport.MTU4096},
	} {
		if got := ActiveMTU(c.netdev); got != c.want {
			t.Errorf("ActiveMTU(%d) = %v (%d bytes), want %v (%d bytes)", c.netdev, got, got.Bytes(), c.want, c.want.Bytes())
		}
	}
}
