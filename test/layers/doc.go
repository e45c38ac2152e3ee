// Package layers holds no code: its test keeps softnic's package graph
// layered (no package imports one above it; the in-memory fabric carries
// datagrams and imports no engine package; the engine is not public API).
package layers
