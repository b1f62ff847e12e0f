// Package emuproc starts and stops the external servers that tests and the
// local emulator stack run against: the official Firestore and Pub/Sub
// emulators (started through gcloud) and fake-gcs-server.
//
// On unix systems Start runs the command under a small sh supervisor in a
// process group of its own. The supervisor reports the command's pid and
// watches its stdin, a pipe from this process: when the pipe closes — Stop,
// or this process dying in any way, even by SIGKILL — it terminates the
// command and the command's process group. gcloud moves itself and its JVM
// into a group of their own, so both groups are reached, and nothing is
// orphaned. Pdeathsig is not used: it fires when the starting OS thread
// exits, which in Go can happen long before the process does.
//
// Elsewhere Start runs the command directly and Stop kills it; children the
// command starts may then outlive it.
//
// WaitHTTP and WaitTCP wait for a started server to answer, FreePort picks
// a port for it, and Gcloud starts an official emulator and shares one
// among the tests of a binary. Require skips a test whose tool is missing,
// or fails it when CI=true, because CI must never pass by skipping.
package emuproc
