//go:build linux && cgo

package sandbox

// The zygote's C halves (zygote_linux.c, zygote_main_linux.c) are built
// into every program that links this package where cgo is; a build
// without cgo confines with bubblewrap alone.

// #include "zygote_linux.h"
import "C"

const zygoteBuilt = true

// StepID is the zygote's STEP_ID: a constant that compiles only when the
// two are the same.
const _ = uint(StepID-C.STEP_ID) + uint(C.STEP_ID-StepID)

// ctlFD is where either way puts a step's control socket: the zygote's
// CTL_FD likewise.
const _ = uint(ctlFD-C.CTL_FD) + uint(C.CTL_FD-ctlFD)
