package wire

// PayloadCRCs are the two payload CRCs ComputeICRC may run (payloadCRC),
// by name, for tests that check both.
var PayloadCRCs = map[string]func(uint32, []byte) uint32{"hash/crc32": crcLib, "slicing-by-8": crcSlicing}

// UsePayloadCRC makes ComputeICRC run f until the returned func restores
// the one the package picked.
func UsePayloadCRC(f func(uint32, []byte) uint32) (restore func()) {
	old := payloadCRC
	payloadCRC = f
	return func() { payloadCRC = old }
}
