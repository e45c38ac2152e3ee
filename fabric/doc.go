// Package fabric is a deterministic in-memory network for RoCEv2
// datagrams: the link softnic's own tests run on, and a library for users'
// in-process tests (STYLE.md 16; modelled on pion/transport test/bridge.go,
// gVisor link/channel and quic-go's simnet).
//
// A [Fabric] connects [Endpoint]s, each attached at one IP address and each
// a [link.Link]. WriteBatch copies every datagram into a fabric-owned buffer
// and routes it by its destination address; ReadBatch blocks (durably, in
// the testing/synctest sense) until datagrams arrive. Nothing blocks a
// sender: a full receive queue drops and counts, as a real NIC would.
//
// On the way, each datagram passes through, in order:
//
//  1. taps ([Fabric.Tap]) and the pcap writer ([Config.Pcap]), which see
//     every datagram offered;
//  2. routing: a destination with no endpoint is dropped and counted;
//  3. filters ([Fabric.AddFilter]): exact, scripted faults such as
//     [DropNth](3, [OpcodeIs](wire.RCWriteMiddle));
//  4. seeded random impairments ([Impairment]: loss, corruption,
//     duplication, reordering, delay and jitter), fabric-wide or per
//     directed path, for packets no filter acted on.
//
// Randomness is a pure function of [Config.Seed], the directed path and
// the packet's index on that path, so a given packet sequence on a path
// sees the same decisions on every run, whatever other goroutines do.
// Delays run on [Config.Clock]: on a [clock.Manual] a delayed packet
// arrives only when the test advances time; under testing/synctest the
// default real clock runs on the bubble's fake time.
//
// An endpoint's interface can go down and come back
// ([Endpoint.SetLinkState]): a NIC's port follows it. An address can be a
// host without a RoCE NIC ([Fabric.AddHost]), which answers every
// datagram with an ICMP port unreachable the sender's endpoint reports
// ([Endpoint.WatchSendErrors]).
//
// The fabric starts no goroutines of its own. Delayed packets are
// delivered from a single clock timer. [Fabric.Close] closes every
// endpoint and stops that timer.
package fabric
