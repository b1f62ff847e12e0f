// Package firestorecoord is the Cloud Firestore backend of package coord:
// table leases, the staged-file registry, batches, status, expiry and the
// reconcile's watermarks kept in Firestore documents, each change in one
// transaction. The collections are listed in firestorecoord.go; only
// dsdelta_files and dsdelta_batches may have a TTL policy, never
// dsdelta_watermarks. The core packages
// (coord, pipeline) never import it, so the Firestore client is linked only
// into programs that do (the functions, the CLI, the emulator).
//
// With FIRESTORE_EMULATOR_HOST set, a client built from the environment
// talks to that emulator.
package firestorecoord
