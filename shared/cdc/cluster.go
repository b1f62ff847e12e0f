package cdc

import (
	"strings"

	"github.com/dsdelta/dsdelta/shared/delta"
)

// ClusterColumns are the columns compaction clusters a table by: for a
// current-state table, the primary key recorded when it was created (the
// columns of it still in the schema), so that a merge's key lookups prune
// to few files, then in mode scd2 the versions' _ds_valid_from; none for
// the history, which stays in arrival order.
func ClusterColumns(snap *delta.Snapshot) []string {
	conf := snap.Configuration()
	if conf[PropRole] != "state" || conf[PropKey] == "" {
		return nil
	}
	schema := snap.Schema()
	var out []string
	for _, k := range strings.Split(conf[PropKey], ",") {
		if schema.Index(k) >= 0 {
			out = append(out, k)
		}
	}
	if TableMode(snap) == ModeSCD2 && len(out) > 0 {
		// A key's versions side by side, in their order in time.
		out = append(out, ColValidFrom)
	}
	return out
}

// CompactionOptions are the Optimize options of a table: state tables are
// clustered by key (ClusterColumns) and keep what merges write into their
// files for lookups, a bloom filter on the first key column and small
// pages (StatePageBytes), so that a compacted file is not read whole by
// every later lookup. An scd2 table also keeps its closed versions
// (ColValidTo set) in files apart from the open ones, each group clustered
// by key and ColValidFrom: a merge that only extends keys needs their open
// versions (see scd2Lookup), so it skips the closed files, which hold most
// rows, and the row groups it rewrites to close versions hold no history.
func CompactionOptions(snap *delta.Snapshot) delta.OptimizeOptions {
	cols := ClusterColumns(snap)
	o := delta.OptimizeOptions{ClusterBy: cols}
	if len(cols) > 0 {
		o.BloomFilterColumns = cols[:1]
		o.PageBytes = StatePageBytes
		if TableMode(snap) == ModeSCD2 {
			o.SeparateNulls = ColValidTo
		}
	}
	return o
}
