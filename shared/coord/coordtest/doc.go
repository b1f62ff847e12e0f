// Package coordtest is the conformance suite every coordination backend
// runs, so that the local backend behaves like the Firestore one: leases with
// fencing tokens, idempotent registration, skipped files, lookups of many
// files, batches that resume after a crash, status, expiry and watermarks
// with compare-and-swap.
package coordtest
