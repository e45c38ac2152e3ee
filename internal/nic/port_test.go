package nic

import "testing"

// TestEthSpeed: the speed and width of a port on an Ethernet interface of
// each speed are the kernel's (ib_get_eth_speed, ib_get_width_and_speed
// without lanes), at every threshold and on either side of it; unknown
// (0) is taken as 1000 Mb/s.
func TestEthSpeed(t *testing.T) {
	for _, c := range []struct {
		mbps         int
		speed, width uint8
	}{
		{0, SpeedSDR, Width1X}, // SPEED_UNKNOWN, loopback, dummy: SPEED_1000
		{-1, SpeedSDR, Width1X},
		{10, SpeedSDR, Width1X}, // a tun's default
		{100, SpeedSDR, Width1X},
		{1000, SpeedSDR, Width1X},
		{1001, SpeedFDR10, Width1X},
		{2500, SpeedFDR10, Width1X},
		{10000, SpeedFDR10, Width1X}, // veth
		{10001, SpeedDDR, Width4X},
		{20000, SpeedDDR, Width4X},
		{25000, SpeedEDR, Width1X},
		{40000, SpeedFDR10, Width4X},
		{50000, SpeedEDR, Width2X},
		{56000, SpeedEDR, Width4X},
		{100000, SpeedEDR, Width4X},
		{200000, SpeedHDR, Width4X},
		{400000, SpeedNDR, Width4X},
		{800000, SpeedNDR, Width4X},
	} {
		if s, w := EthSpeed(c.mbps); s != c.speed || w != c.width {
			t.Errorf("EthSpeed(%d) = speed %d width %d, want speed %d width %d", c.mbps, s, w, c.speed, c.width)
		}
	}
}
