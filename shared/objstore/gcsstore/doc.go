// Package gcsstore is the Google Cloud Storage driver of package objstore:
// stores on a bucket, or a prefix of one, through the JSON API of
// cloud.google.com/go/storage. Importing it registers the gs:// scheme with
// objstore.Open; the core packages never import it, so the cloud client is
// linked only into programs that do (the functions, the CLI, the emulator).
//
// With STORAGE_EMULATOR_HOST set, a client built from the environment (Open,
// gs:// URLs) talks to that emulator (fake-gcs-server).
package gcsstore
