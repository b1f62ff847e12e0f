// Command emulator runs the whole dsdelta system on a laptop, on the
// official emulators: the Pub/Sub emulator and the Firestore emulator (from
// the gcloud SDK), fake-gcs-server publishing object notifications into
// Pub/Sub, the three functions (OnFile, Merge, Compact) served by
// functions-framework-go with a push subscription each, and a ticker that
// plays Cloud Scheduler. With --simulate it writes a simulated Datastream
// stream into the source bucket.
//
//	go run ./emulator --simulate
//
// Every part runs as a child process in a process group of its own; Ctrl-C
// (or SIGTERM) stops them all, and a supervisor per child stops it even if
// the emulator is killed.
package main
