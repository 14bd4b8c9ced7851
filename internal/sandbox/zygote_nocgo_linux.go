//go:build linux && !cgo

package sandbox

// zygoteBuilt: a build without cgo has no zygote (zygote_cgo_linux.go).
const zygoteBuilt = false
