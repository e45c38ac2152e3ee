//go:build !race

package mem

// dmaCopy is copy(dst, src) for the bytes of registered memory; see
// dmacopy_race.go for why race builds copy differently.
func dmaCopy(dst, src []byte) int { return copy(dst, src) }
