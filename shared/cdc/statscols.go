package cdc

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Statistics where pruning needs them. A merge skips the files whose
// statistics exclude its keys (prune), the duplicate check the history
// files whose source-timestamp bounds exclude its events, an SCD2 merge
// the files whose ColValidTo null count says they hold only closed
// versions. Delta writers give statistics to the first 32 leaf columns
// only (delta.dataSkippingNumIndexedCols, PROTOCOL.md "Per-file
// Statistics" leaves the choice to the writer): in a table whose key,
// source timestamp or mode column lies beyond them, every merge would
// read every file. Such a table gets delta.dataSkippingStatsColumns
// (delta.StatsColumnsFor) listing those columns and the first 32: when it
// is created, and in the first commit of a merge to an existing one. A
// table whose columns are all within the first 32 keeps the default, and
// its metadata is unchanged. A property a user set is kept, with the
// columns merges need added to it.

// Table roles, as openOrCreate records them (PropRole).
const (
	roleState      = "state"
	roleHistory    = "history"
	roleTombstones = "tombstones"
)

// statsNeeds are the columns of a table of role whose statistics merges
// read: the key columns (prune and keyplan read the first; the others
// keep their statistics for readers' predicates), the source timestamp,
// and the columns a mode's merges and compaction split by.
func statsNeeds(role string, key []string, mode Mode) []string {
	need := append(slices.Clone(key), ColSourceTimestamp)
	switch {
	case role == roleTombstones:
		need = append(need, ColDeletedAt)
	case role == roleState && mode == ModeSCD2:
		need = append(need, ColValidFrom, ColValidTo)
	case role == roleState && mode == ModeSoftDelete:
		need = append(need, ColDeletedAt)
	}
	return need
}

// withStatsColumns returns conf (not modified) with
// delta.dataSkippingStatsColumns set so that the need columns of a table
// of schema get statistics, and whether it had to change.
func withStatsColumns(schema value.StructType, partitionColumns []string, conf map[string]string, need []string) (map[string]string, bool, error) {
	prop, changed, err := delta.StatsColumnsFor(schema, partitionColumns, conf, need)
	if err != nil || !changed {
		return conf, false, err
	}
	out := maps.Clone(conf)
	if out == nil {
		out = map[string]string{}
	}
	out[delta.PropDataSkippingStatsColumns] = prop
	return out, true, nil
}

// createWithStats sets the statistics columns of a table about to be
// created with co.
func createWithStats(co *delta.CreateOptions, need []string) error {
	conf, _, err := withStatsColumns(co.Schema, co.PartitionColumns, co.Configuration, need)
	co.Configuration = conf
	return err
}

// metadataWithStats returns the metadata a commit to snap sets, md (nil:
// none), with the statistics columns need asks for: md or a copy of the
// snapshot's with the property changed, or md itself when it needs no
// change. A table that has them commits no metadata for them, so merges
// keep not conflicting with concurrent writers (a metadata action
// conflicts with every one).
func metadataWithStats(snap *delta.Snapshot, md *delta.Metadata, need []string) (*delta.Metadata, error) {
	m := snap.Metadata()
	if md != nil {
		m = *md
	}
	schema, err := value.ParseSchema(m.SchemaString)
	if err != nil {
		return nil, fmt.Errorf("statistics columns: %w", err)
	}
	conf, changed, err := withStatsColumns(schema, m.PartitionColumns, m.Configuration, need)
	if err != nil || !changed {
		return md, err
	}
	m.Configuration = conf
	return &m, nil
}

// HistoryStatsConfiguration is the configuration a writer of files for a
// history table of source schema and key gives WriteOptions, so that
// files the history takes as they are (HistoryFile) have the statistics
// its merges read, as the files the history writes itself have.
func HistoryStatsConfiguration(source value.StructType, key []string) map[string]string {
	conf, _, _ := withStatsColumns(HistorySchema(source), []string{ColSourceDate}, nil, statsNeeds(roleHistory, key, ModeCurrent))
	return conf
}
