package link

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the package's tests twice: with the links' sockets in Go's
// netpoller, then outside it (UDPConfig.Unpolled), every ListenUDP of
// the tests opening them so.
func TestMain(m *testing.M) {
	code := m.Run()
	fmt.Println("link: the tests again, every UDP link unpolled (UDPConfig.Unpolled)")
	unpolledTest = true
	if c := m.Run(); code == 0 {
		code = c
	}
	os.Exit(code)
}
