//go:build race

package wire

// dmaCRC updates a CRC over registered memory (FinishSplit's payload)
// with crcUpdate's slicing-by-8, which the race detector does not
// instrument (go:norace), as package mem's dmaCopy is kept out of it:
// the application and other QPs may write that memory at any time, as
// they may under a NIC's DMA, and the detector cannot know that these
// races are the hardware's. hash/crc32's CLMUL path is assembly, but the
// Go code around it (the bytes before and after its 16-byte blocks) is
// instrumented. Only race builds pay for the slower CRC.
func dmaCRC(crc uint32, p []byte) uint32 { return crcSlicing(crc, p) }
