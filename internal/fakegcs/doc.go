// Package fakegcs finds the fake-gcs-server binary that the local stack
// (go run ./emulator) and the tests run, and builds it from its pinned
// module version when it is not installed, so that nothing needs installing
// by hand: the Go toolchain and the module proxy are enough.
package fakegcs
