// Package value defines the data types and typed values that flow from
// Datastream decoding through the CDC engine into Delta tables, their Spark
// StructType JSON form (Delta's schemaString), and the one canonical JSON
// encoding of values that `dsdelta show` and `dsdelta decode` print.
//
// It is a leaf package: datastream, cdc and delta all speak it, so a value
// decoded from an Avro record reaches a Parquet column without another
// conversion layer.
//
// Go representation of values, by type:
//
//	null                 nil
//	boolean              bool
//	byte/short/integer   int8 / int16 / int32
//	long                 int64
//	float / double       float32 / float64
//	string               string
//	binary               []byte
//	decimal(p,s)         Decimal (unscaled big integer + scale)
//	date                 Days (days since 1970-01-01)
//	timestamp            Micros (microseconds since the epoch, UTC)
//	timestamp_ntz        LocalMicros (microseconds since 1970-01-01T00:00, wall clock)
//	struct               []any, one entry per field in order
//	array                []any
//	map                  []MapEntry, in the order read
package value
