// Package gcstest runs fake-gcs-server for tests that need a GCS bucket.
//
// A test starts one server with Start (or a TestMain with StartServer), makes
// a client with NewClient and a fresh bucket per test with NewBucket, so
// tests sharing a server can run in parallel. The client is pointed at the
// server through client options, not STORAGE_EMULATOR_HOST, so nothing
// global changes.
//
// The server binary is found, or built from its pinned version, by package
// fakegcs; where it can be neither (no Go toolchain) tests are skipped, or
// failed when CI=true, because CI must never pass by skipping.
//
// Per test function (the usual way; subtests share the server):
//
//	host := gcstest.Start(t)
//	client, err := gcstest.NewClient(t.Context(), host)
//	...
//	store := gcsstore.New(client, gcstest.NewBucket(t, client), "")
//
// Per test binary, from TestMain, with StartServer and Server.Close; a
// TestMain cannot skip, so it should let the tests that need the server skip
// themselves when StartServer returned ErrNotInstalled.
package gcstest
