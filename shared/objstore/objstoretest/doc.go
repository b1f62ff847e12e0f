// Package objstoretest is the conformance suite every objstore.Store backend
// must pass, so that the local and in-memory stores used by the embedded mode
// and the tests behave exactly like GCS.
package objstoretest
