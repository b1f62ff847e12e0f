// Package mergebench holds what the merge benchmarks share between the
// driver and the mergechild process: the deterministic base tables and
// batches, resetting a table between runs, and the child's measured merge.
// It does not import DuckDB, so a process running a merge links only what
// a merge function links.
package mergebench
