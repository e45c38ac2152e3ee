//go:build !race

package wire

// dmaCRC updates a CRC over registered memory (FinishSplit's payload):
// payloadCRC, the fastest here. Race builds have one the detector does
// not instrument (dmacrc_race.go).
func dmaCRC(crc uint32, p []byte) uint32 { return payloadCRC(crc, p) }
