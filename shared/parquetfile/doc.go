// Package parquetfile holds Parquet files as bytes, apart from what a
// Delta table makes of them: it hardens opening a file of an object store
// (checks of its tail, footer, column chunk metadata, pages and page
// index before parquet-go acts on them; caps on what codecs inflate and on
// Thrift structures; ErrCorrupt for whatever fails), reads it through a
// range-merging prefetch (File), fetches its bloom filters and page
// indexes, knows how a decimal of more than 18 digits is stored
// (decimal.go), builds a file's Parquet schema from value types, with how
// their values shred into its leaf columns (NewSchema, Node.Shred): the
// names and field ids of columns are the caller's (Naming), streams a
// file into an object as it is written (Writer: codecs, pages, bloom
// filters, row groups copied from other files), writes rows of package
// value's values into it (RowWriter: their conversion to leaf values,
// batched column by column, row groups ended at a size or row count,
// WriteInOrder's column arrays lent by ValueArrays, and row groups of
// other files appended whole or without the rows a drop mask marks, with
// the kept values' null counts and Extremes), rebuilds a file's schema
// tree from its footer (Tree), and converts a leaf's stored values, in
// whatever physical type and unit its writer chose, to the values of
// package value (Converter, Kept). What a table makes of the rows (which
// fields are columns, checks of each row, statistics) comes in as plain
// inputs and callbacks.
//
// It reads a file's rows (Read, from a ReadSpec of plain inputs: the
// output fields and how to find them (Naming), constants such as
// partition values, a deletion bitmap of row positions, a row group
// filter): record assembly of nested values (Assembly), a flat read of
// flat schemas (read_flat.go), the skipping of row groups by their footer
// bounds (RowGroupBounds) and bloom filters (RowGroupFilter), and sparse
// reads through the page index (pageindex.go, ReadSpec.OnlyValues) of the
// pages that can hold a value looked for that the row group's bloom
// filter may hold.
//
// It imports parquet-go, objstore and value, never delta: package delta
// reads and writes its data files through it.
package parquetfile
