// Package benchchild is the child side of the bench driver: the flags of a
// child process and the measured dsdelta work they select. The mergechild
// command and the driver's fallback child mode (the driver re-executing
// itself) both parse them here, so the two cannot drift apart.
package benchchild
