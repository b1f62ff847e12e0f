// Package pipeline holds dsdelta's use cases — Stage a Datastream file,
// MergeTable to apply staged files to a table's Delta tables, Maintain to
// compact and clean up, and for the functions MergeWakeUp (a merge asked
// for by a wake-up that can be delivered again) and MaintainAll (the
// scheduled round over every table), and for the CLI RunOnce (one pass of
// an embedded run: stage, merge, maintain), Watch (run --watch: staging
// and merging side by side until stopped), Unmerged and Replay (stage
// again after a fix, and merge), and Describe (what a Delta table's
// snapshot says of it) — over the object-store and
// coordination interfaces, so the cloud functions, the CLI's embedded run
// and the emulator run the same code.
//
// "Table" has one sense per name:
//
//   - a table id ("<db>.<table>", or "<namespace>.<db>.<table>" for a
//     stream the configuration gives a namespace; datastream.TableID;
//     parameters tableID) names a source table, and is the key of
//     everything below;
//   - a table set (cdc.TableSet, from Pipeline.TableSet or TableSetIn) is
//     the three Delta tables of one source table;
//   - a Delta table (delta.Table) is one of those three;
//   - a table status (coord.TableStatus, from Status.Status) is the
//     coordination view of one table id, and Status.Statuses lists them
//     all.
//
// A file no table id can be read from is quarantined under UnknownTable.
//
// Lake layout (TableSetIn is the only place table ids become paths, and
// TableSetBeside the only place a table's siblings are named):
//
//	<lake>/[<namespace>/]<db>/<table>              current state (Delta)
//	<lake>/[<namespace>/]<db>/<table>_log          history (Delta, partitioned by source date)
//	<lake>/[<namespace>/]<db>/<table>_tombstones   deleted keys (Delta)
//	<lake>/_staging/<table id>/<id>.parquet|.json  staged files
//	<lake>/_dsdelta/sources/<table id>.json        the stream a table is fed from (claimSource)
package pipeline
