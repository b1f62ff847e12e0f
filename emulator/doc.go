// Command emulator runs the whole dsdelta system on a laptop, on the
// official emulators: the Pub/Sub emulator and the Firestore emulator (from
// the gcloud SDK), fake-gcs-server publishing object notifications into
// Pub/Sub, the three functions (OnFile, Merge, Compact) served by
// functions-framework-go with a push subscription each, and a ticker that
// plays Cloud Scheduler. With --simulate it writes a simulated Datastream
// stream into the source bucket, its newest change dated now (with
// --fixed-dates, from dssim's fixed start, as the tests do). With --config FILE the functions run with
// that configuration file (YAML or JSON), given to them in DSDELTA_CONFIG
// as terraform gives it; a file that shared/config refuses stops the
// emulator at once, naming the bad setting.
//
//	go run ./emulator --simulate
//	go run ./emulator --config dsdelta.yaml
//
// onfile also has a push subscription on the reconcile topic
// (DSDELTA_RECONCILE_TOPIC), where compact's reconcile publishes the
// notifications that never came. The notification subscription reaches
// onfile through a small proxy in the emulator's process, which tests use
// to lose a share of the notifications on purpose
// (Options.DropNotifications, Stack.SetDropRate, Stack.Dropped).
//
// Every part runs as a child process in a process group of its own; Ctrl-C
// (or SIGTERM) stops them all, and a supervisor per child stops it even if
// the emulator is killed.
package main
