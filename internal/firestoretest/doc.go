// Package firestoretest runs the official Cloud Firestore emulator for a test
// binary. A package's TestMain calls Main, which starts one emulator
// (`gcloud emulators firestore start`), points FIRESTORE_EMULATOR_HOST at it
// for the whole binary and stops it, with every child process, when the
// tests end. Tests then call NewClient, which skips when the emulator is not
// available, or fails when CI=true, because CI must never pass by skipping.
//
// When FIRESTORE_EMULATOR_HOST is already set, Main uses that emulator and
// starts none. Tests isolate themselves with their own collection prefix.
package firestoretest
