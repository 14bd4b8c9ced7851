//go:build linux && cgo

package sandbox

// The zygote's C halves (zygote_linux.c, zygote_main_linux.c) are built
// into every program that links this package where cgo is; a build
// without cgo confines with bubblewrap alone.

import "C"

const zygoteBuilt = true
