package nic

import (
	"testing"

	"github.com/softnic/softnic/ibv"
)

// TestActiveMTU checks ActiveMTU against rxe_set_mtu at each threshold
// (an IB MTU plus RXE_MAX_HDR_LENGTH, 80) and around it.
func TestActiveMTU(t *testing.T) {
	for _, c := range []struct {
		netdev int
		want   ibv.MTU
	}{
		{0, ibv.MTU256}, {68, ibv.MTU256}, // below 256+80: "mtu ? ... : IB_MTU_256"
		{335, ibv.MTU256}, {336, ibv.MTU256},
		{591, ibv.MTU256}, {592, ibv.MTU512},
		{1103, ibv.MTU512}, {1104, ibv.MTU1024},
		{1500, ibv.MTU1024},
		{2127, ibv.MTU1024}, {2128, ibv.MTU2048},
		{4175, ibv.MTU2048}, {4176, ibv.MTU4096},
		{9000, ibv.MTU4096}, {65536, ibv.MTU4096},
	} {
		if got := ActiveMTU(c.netdev); got != c.want {
			t.Errorf("ActiveMTU(%d) = %v (%d bytes), want %v (%d bytes)", c.netdev, got, got.Bytes(), c.want, c.want.Bytes())
		}
	}
}
