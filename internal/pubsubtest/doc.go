// Package pubsubtest runs the official Cloud Pub/Sub emulator for a test
// binary. A package's TestMain calls Main, which starts one emulator
// (`gcloud beta emulators pubsub start`) on a free port, points
// PUBSUB_EMULATOR_HOST at it for the whole binary and stops it, with every
// child process, when the tests end. Tests then call NewClient, which skips
// when the emulator is not available, or fails when CI=true, because CI
// must never pass by skipping; and NewTopic for a topic of their own, so
// tests sharing the emulator can run in parallel.
//
// When PUBSUB_EMULATOR_HOST is already set, Main uses that emulator and
// starts none.
package pubsubtest
