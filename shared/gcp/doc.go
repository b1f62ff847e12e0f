// Package gcp builds the pipeline's services on Google Cloud (or its
// emulators) from DSDELTA_* environment variables: the lake and source
// buckets on Cloud Storage, Firestore coordination, and Pub/Sub for merge
// wake-ups and dead letters. The client libraries honour
// STORAGE_EMULATOR_HOST, FIRESTORE_EMULATOR_HOST and PUBSUB_EMULATOR_HOST,
// which is how the emulator stack runs the same code.
package gcp
